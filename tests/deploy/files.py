"""The deployment files as data: the compose file with its variables resolved, the Dockerfiles, the manifests."""
from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import shlex

import yaml
from dockerfile_parse import DockerfileParser

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILES = {"cpu": DEPLOY / "docker" / "Dockerfile.cpu", "gpu": DEPLOY / "docker" / "Dockerfile.gpu"}
HAPROXY = DEPLOY / "haproxy" / "haproxy.cfg"
K8S = DEPLOY / "k8s"
README = DEPLOY / "README.md"

# ${NAME}, ${NAME:-default} (unset or empty) and ${NAME-default} (unset), as compose interpolates them.
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}")


def interpolate(text: str, environ: dict[str, str] | None = None) -> str:
    environ = environ or {}

    def value(match: re.Match) -> str:
        name, op, default = match.groups()
        if name in environ and (op != ":-" or environ[name]):
            return environ[name]
        return default or ""

    return _VARIABLE.sub(value, text)


def compose_variables() -> set[str]:
    return {m.group(1) for m in _VARIABLE.finditer(COMPOSE.read_text())}


def compose(environ: dict[str, str] | None = None) -> dict:
    """docker-compose.yml as compose reads it: variables resolved (defaults unless `environ` sets them)."""
    return yaml.safe_load(interpolate(COMPOSE.read_text(), environ))


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


@dataclasses.dataclass(frozen=True)
class Dockerfile:
    path: pathlib.Path
    instructions: list[dict]  # dockerfile_parse's structure: instruction, value, line numbers
    env: dict[str, str]  # the final stage's ENV

    def values(self, instruction: str) -> list[str]:
        return [i["value"] for i in self.instructions if i["instruction"] == instruction]

    def exec_form(self, instruction: str) -> list[str]:
        """The last ENTRYPOINT or CMD, which must be in exec (JSON) form so that the daemon is PID 1."""
        return json.loads(self.values(instruction)[-1])

    def stages(self) -> dict[str, list[tuple[str, str]]]:
        """Each stage's instructions, (instruction, value) without comments, by its name (`FROM ... AS name`); the
        final stage, unnamed, is ""."""
        stages: dict[str, list[tuple[str, str]]] = {}
        for i in self.instructions:
            if i["instruction"] == "FROM":
                name = i["value"].split(" AS ")[1] if " AS " in i["value"] else ""
                stage = stages[name] = []
            elif i["instruction"] != "COMMENT" and stages:  # the ARGs before the first FROM are global
                stage.append((i["instruction"], i["value"]))
        return stages

    @property
    def healthcheck(self) -> tuple[dict[str, str], str]:
        """The HEALTHCHECK's options ({"interval": "15s", ...}) and its shell command."""
        value = self.values("HEALTHCHECK")[-1]
        options, _, command = value.partition(" CMD ")
        return dict(o.lstrip("-").split("=", 1) for o in options.split()), command.strip()


def dockerfile(kind: str) -> Dockerfile:
    with open(DOCKERFILES[kind], "rb") as f:
        parser = DockerfileParser(fileobj=f)
        return Dockerfile(DOCKERFILES[kind], parser.structure, dict(parser.envs))


def healthcheck_argv(command: str, environ: dict[str, str]) -> list[str]:
    """The HEALTHCHECK's command as `sh -c` would run it, without its `|| exit 1` (Docker wants 0 or 1)."""
    command = command.split("||")[0]
    return shlex.split(interpolate(command, environ))


def k8s_documents(*names: str) -> list[dict]:
    paths = [K8S / n for n in names] if names else sorted(K8S.glob("*.yaml"))
    return [d for p in paths for d in yaml.safe_load_all(p.read_text()) if d]


def k8s_kind(kind: str) -> list[dict]:
    return [d for d in k8s_documents() if d.get("kind") == kind]


def readme_names() -> set[str]:
    """Everything deploy/README.md puts in backticks: the variables and files it documents."""
    quoted = re.findall(r"`([^`\n]+)`", README.read_text())
    return set(quoted) | {q.split("=", 1)[0] for q in quoted}


def haproxy() -> dict[str, list[str]]:
    """deploy/haproxy/haproxy.cfg by section ("global", "defaults", "frontend grpc_cpu", ...): its lines, stripped,
    without comments."""
    sections: dict[str, list[str]] = {}
    current = ""
    for raw in HAPROXY.read_text().splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line:
            continue
        if line[0].isspace():
            sections[current].append(line.strip())
        else:
            current = line.strip()
            sections[current] = []
    return sections
