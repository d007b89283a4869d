"""The compose file, Dockerfiles, HAProxy config and manifests parse, validate, and name only what the project has."""
import dataclasses
import fnmatch
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

import httpx
import kubernetes_validate
import pytest

from tests.deploy import files
from xlacs.cli import COMPILER_SERVICE, build_parser
from xlacs_server import jax_versions
from xlacs_server.config import Settings

SETTINGS = {f"XLACS_{f.name.upper()}" for f in dataclasses.fields(Settings)}
DEFAULTS = Settings()
PYPROJECT = tomllib.loads((files.ROOT / "pyproject.toml").read_text())
XLACS_SERVICES = ("xlacs", "xlacs-gpu")
K8S_VERSION = "1.30"  # gRPC probes are GA since 1.27


def known_variable(name: str) -> bool:
    """An XLACS_* variable is a Settings field; any other one is documented in deploy/README.md."""
    return name in SETTINGS if name.startswith("XLACS_") else name in files.readme_names()


def parses_as_cli(argv: list[str]) -> str:
    """The `xlacs` subcommand that argv runs; argparse exits if argv is not a valid command line."""
    assert argv[0] == "xlacs" and "xlacs" in PYPROJECT["project"]["scripts"], argv
    return build_parser().parse_args(argv[1:]).command


@pytest.fixture(scope="module")
def dashboard(server):
    """The dashboard's HTTP server of a ready daemon, where the probes go."""
    from xlacs_server.dashboard import create_app
    from xlacs_server.dashboard.http import HttpServer
    http = HttpServer(create_app(server.service), "127.0.0.1", 0)
    http.start()
    with httpx.Client(base_url=f"http://127.0.0.1:{http.port}", timeout=60) as client:
        yield client
    http.stop()


def assert_probe_answers(dashboard: httpx.Client, path: str, route: str) -> None:
    """`path` is the protocol's route `route`, which a ready daemon answers 200 with the protocol's body (any other
    path under /v2 is the protocol's 404): a probe that would keep every replica out fails here."""
    assert path == route
    answer = dashboard.get(path)
    assert answer.status_code == 200 and answer.json() == {READY: {"ready": True}, LIVE: {"live": True}}[route]


READY, LIVE = "/v2/health/ready", "/v2/health/live"  # the Open Inference Protocol's, fixed by its specification


# ---- docker-compose.yml


def test_compose_validates_against_the_compose_specification():
    result = subprocess.run([pathlib.Path(sys.executable).with_name("check-jsonschema"), "--builtin-schema",
                             "vendor.compose-spec", str(files.COMPOSE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_variables_are_documented():
    assert files.compose_variables() - files.readme_names() == set()


def test_compose_environment_names_settings_or_documented_variables():
    services = files.compose()["services"]
    for name in XLACS_SERVICES:
        env = files.environment(services[name])
        assert {"XLACS_REDIS_URL", "XLACS_CACHE_SECRET_FILE", "XLACS_AUTH_TOKENS_FILE"} <= env.keys()
        assert [v for v in env if not known_variable(v)] == []
        Settings.from_env(env)  # every value parses as its field's type


def test_compose_redis_is_an_lru_cache_that_every_replica_uses():
    services = files.compose()["services"]
    command = services["redis"]["command"]
    assert command[0] == "redis-server"
    assert command[command.index("--maxmemory-policy") + 1] == "allkeys-lru"
    assert re.fullmatch(r"\d+[kmg]b", command[command.index("--maxmemory") + 1])
    assert services["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    for name in XLACS_SERVICES:
        assert files.environment(services[name])["XLACS_REDIS_URL"] == "redis://redis:6379/0"
        assert services[name]["depends_on"]["redis"] == {"condition": "service_healthy"}


def test_compose_redis_persistence_follows_the_variables():
    persistent = files.compose({"REDIS_SAVE": "3600 1", "REDIS_APPENDONLY": "yes"})["services"]["redis"]["command"]
    assert persistent[persistent.index("--save") + 1] == "3600 1"
    assert persistent[persistent.index("--appendonly") + 1] == "yes"
    default = files.compose()["services"]["redis"]["command"]
    assert (default[default.index("--save") + 1], default[default.index("--appendonly") + 1]) == ("", "no")


def test_compose_services_build_from_the_dockerfiles_they_name():
    services = files.compose()["services"]
    for name, kind in (("xlacs", "cpu"), ("xlacs-gpu", "gpu")):
        build = services[name]["build"]
        assert (files.ROOT / build["context"] / build["dockerfile"]).resolve() == files.DOCKERFILES[kind]
        assert services[name]["image"] == f"xlacs:{kind}"
        assert "command" not in services[name]  # the image's CMD starts the daemon
        # The replicas scale: no fixed container name and no host port of their own.
        assert "container_name" not in services[name] and "ports" not in services[name]
        assert sorted(map(int, services[name]["expose"])) == sorted([DEFAULTS.port, DEFAULTS.http_port])


def test_compose_gpu_service_reserves_nvidia_gpus_under_a_profile():
    gpu = files.compose()["services"]["xlacs-gpu"]
    assert gpu["profiles"] == ["gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]


def test_compose_secrets_are_files_outside_git_mounted_where_the_settings_point():
    config = files.compose()
    ignored = subprocess.run(["git", "check-ignore", "-q", "deploy/secrets/cache_secret"], cwd=files.ROOT)
    assert ignored.returncode == 0, "deploy/secrets/ must be ignored by git"
    for name in XLACS_SERVICES:
        service = config["services"][name]
        mounted = {f"/run/secrets/{s}" for s in service["secrets"]}
        file_settings = {k: v for k, v in files.environment(service).items() if k.endswith("_FILE")}
        assert set(file_settings.values()) == mounted
        for secret in service["secrets"]:
            assert pathlib.Path(config["secrets"][secret]["file"]).parts[:2] == ("deploy", "secrets")


def test_compose_stop_grace_outlasts_the_daemons_drain():
    services = files.compose()["services"]
    for name in XLACS_SERVICES:
        grace = Settings.from_env(files.environment(services[name])).shutdown_grace_s
        assert int(services[name]["stop_grace_period"].rstrip("s")) > grace


def test_compose_replicas_are_ready_by_the_protocols_readiness_on_their_http_port(dashboard):
    services = files.compose()["services"]
    for name in XLACS_SERVICES:
        command = services[name]["healthcheck"]["test"]
        assert command[:3] == ["CMD", "python", "-c"]
        url = re.search(r'"http://127\.0\.0\.1:%s(/[^"]*)" % os\.environ\.get\("XLACS_HTTP_PORT", "(\d+)"\)',
                        command[3])
        assert url and int(url[2]) == DEFAULTS.http_port, command
        assert_probe_answers(dashboard, url[1], READY)


def test_compose_mounts_the_model_repository_where_the_setting_points():
    for environ, served in (({}, ""), ({"XLACS_MODEL_REPOSITORY": "/models"}, "/models")):
        services = files.compose(environ)["services"]
        for name in XLACS_SERVICES:
            settings = Settings.from_env(files.environment(services[name]))
            assert settings.model_repository == served
            (volume,) = services[name]["volumes"]
            assert volume.split(":")[1:] == ["/models", "ro"]


def test_compose_load_balancer_publishes_the_haproxy_frontends_and_waits_for_health():
    lb = files.compose()["services"]["lb"]
    binds = {int(line.split()[1].rsplit(":", 1)[1]) for name, lines in files.haproxy().items()
             if name.startswith("frontend ") for line in lines if line.startswith("bind ")}
    assert {int(p.rsplit(":", 1)[1]) for p in lb["ports"]} == binds
    assert all(p.startswith("0.0.0.0:") for p in lb["ports"])  # LB_ADDRESS's default: every interface
    mount = lb["volumes"][0].split(":")
    assert (files.ROOT / mount[0]).resolve() == files.HAPROXY and mount[1] == lb["command"][-1]
    assert lb["depends_on"]["xlacs"] == {"condition": "service_healthy"}
    assert lb["depends_on"]["xlacs-gpu"] == {"condition": "service_healthy", "required": False}


# ---- HAProxy


def backends() -> dict[str, list[str]]:
    return {name.split()[1]: lines for name, lines in files.haproxy().items() if name.startswith("backend ")}


def test_haproxy_sends_each_frontend_to_the_compose_replicas_on_the_default_ports():
    """gRPC by connection (a client's channel stays on one replica, which holds its executables), HTTP by request."""
    config, services = files.haproxy(), files.compose()["services"]
    port = {"grpc": DEFAULTS.port, "http": DEFAULTS.http_port}
    for name, lines in config.items():
        if not name.startswith("frontend "):
            continue
        (backend,) = [line.split()[1] for line in lines if line.startswith("default_backend ")]
        kind = backend.rsplit("_", 1)[1]
        assert f"mode {'tcp' if kind == 'grpc' else 'http'}" in lines and f"mode {'tcp' if kind == 'grpc' else 'http'}" in backends()[backend]
        (template,) = [line.split() for line in backends()[backend] if line.startswith("server-template ")]
        service, target_port = template[3].split(":")
        assert service in XLACS_SERVICES and service in services and int(target_port) == port[kind]
        assert int(template[2]) >= 8  # slots for `--scale xlacs=N`, filled from Docker's DNS


def test_haproxy_checks_every_replica_by_the_protocols_readiness_on_its_http_port(dashboard):
    config = files.haproxy()
    (defaults,) = [line.split() for line in config["defaults"] if line.startswith("default-server ")]
    assert defaults[defaults.index("port") + 1] == str(DEFAULTS.http_port) and "check" in defaults
    assert defaults[defaults.index("resolvers") + 1] == "docker" and config["resolvers docker"][0].split()[-1] == \
        "127.0.0.11:53"  # Docker's DNS on a compose network
    assert "option httpchk" in config["defaults"] and "http-check expect status 200" in config["defaults"]
    (send,) = [line.split() for line in config["defaults"] if line.startswith("http-check send ")]
    assert send[send.index("meth") + 1] == "GET"
    assert_probe_answers(dashboard, send[send.index("uri") + 1], READY)
    for name, lines in backends().items():  # none checks otherwise
        assert not [line for line in lines if "check" in line.split()[0]], name


# ---- Dockerfiles and .dockerignore


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_dockerfile_runs_the_daemon_as_a_non_root_user_with_a_health_check(kind):
    image = files.dockerfile(kind)
    assert len(image.values("FROM")) >= 2  # multi-stage: the build tools stay in the first
    assert image.values("USER")[-1].split(":")[0] not in ("0", "root")
    assert parses_as_cli(image.exec_form("ENTRYPOINT") + image.exec_form("CMD")) == "serve"
    options, command = image.healthcheck
    argv = files.healthcheck_argv(command, {})
    assert parses_as_cli(argv) == "health"
    assert argv[argv.index("--server") + 1] == f"127.0.0.1:{DEFAULTS.port}"
    assert set(image.values("EXPOSE")[-1].split()) == {str(DEFAULTS.port), str(DEFAULTS.http_port)}
    assert [v for v in image.env if not known_variable(v)] == []
    assert not any(re.search(r"SECRET|TOKEN|PASSWORD|KEY", name) for name in image.env)


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_dockerfile_copies_paths_that_exist_and_are_sent_to_the_builder(kind):
    sources = [v.split()[0] for v in files.dockerfile(kind).values("COPY") if not v.startswith("--from")]
    assert sources
    for source in sources:
        assert (files.ROOT / source).exists(), source
        assert not dockerignored(source), f"{source} is excluded by .dockerignore"
    for private in (".git", ".venv", "deploy/secrets/cache_secret", "tests", "test-output"):
        assert dockerignored(private), private


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_dockerfile_keeps_the_dependencies_in_a_layer_that_a_source_change_leaves(kind):
    """The final stage is built on the `deps` stage, whose venv layer sees nothing of the build context but the
    requirements that pyproject.toml names (not copied: a COPY would write its gigabytes again), then installs
    xlacs's wheel from the `build` stage, mounted for that RUN alone (no wheel in a layer). pip_ca is mounted for
    the RUNs that download, and only for them."""
    dockerfile = files.dockerfile(kind)
    stages = dockerfile.stages()
    assert list(stages) == ["requirements", "deps", "build", ""]
    assert dockerfile.values("FROM")[-1] == "deps"
    for name in ("deps", ""):
        assert [v for i, v in stages[name] if i == "COPY" and not v.startswith("--from")] == [], name
    assert ("COPY", "--from=requirements /src/requirements.txt /src/") in stages["deps"]
    assert [i for i, _ in stages[""] if i == "COPY"] == []
    _, install = [(i, v) for i, v in stages[""] if i == "RUN"]
    assert install[1].startswith("--mount=type=bind,from=build,") and "/opt/xlacs/bin/xlacs --help" in install[1]
    for name, stage in stages.items():
        for instruction, value in stage:
            if instruction == "RUN":
                downloads = bool(re.search(r"pip (install|wheel)", value)) and "--no-index" not in value
                assert ("--mount=type=secret,id=pip_ca,required=false" in value) == downloads, (name, value)


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_dockerfile_builds_with_the_engines_own_frontend(kind):
    """No `# syntax=` directive: BuildKit would fetch that frontend from Docker Hub, which a build may not reach."""
    assert not re.match(r"#\s*syntax\s*=", files.DOCKERFILES[kind].read_text(), re.IGNORECASE)


def dockerignored(path: str) -> bool:
    """Docker's rule: the last pattern that matches the path or one of its parent directories decides."""
    excluded = False
    parts = pathlib.PurePosixPath(path).parts
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for line in (files.ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate, pattern = line.startswith("!"), line.lstrip("!").rstrip("/")
        pattern = pattern.replace("**/", "*")
        if any(fnmatch.fnmatchcase(p, pattern) for p in prefixes):
            excluded = not negate
    return excluded


def test_images_install_the_daemons_dependencies_and_the_gpu_extra_is_the_oldest_supported_jax():
    """The GPU image's jax[cuda12] is the oldest of the server extra's range (tests/compat checks the range): the jax
    the suite runs on, as the CPU image's Python 3.11 resolves the range to."""
    optional = PYPROJECT["project"]["optional-dependencies"]
    server = PYPROJECT["project"]["dependencies"] + optional["server"]
    cuda = f"jax[cuda12]=={jax_versions.OLDEST}"
    for kind, expected in (("cpu", server), ("gpu", server + [cuda])):
        (install,) = [v for v in files.dockerfile(kind).values("RUN") if "tomllib" in v]
        printed = subprocess.run(["sh", "-c", install[install.index("python -c"):].split(" > ")[0]],
                                 capture_output=True, text=True,
                                 cwd=files.ROOT, check=True).stdout.split()
        assert printed == expected
    assert optional["gpu"] == ["xlacs[server]", cuda]


def test_the_client_depends_on_nothing_of_the_daemon():
    """`pip install xlacs` is the client: the daemon's packages come with the `server` extra alone."""
    base = {re.split(r"[=<>\[]", d)[0] for d in PYPROJECT["project"]["dependencies"]}
    daemon = {re.split(r"[=<>\[]", d)[0] for d in PYPROJECT["project"]["optional-dependencies"]["server"]}
    assert base >= {"grpcio", "protobuf", "numpy"} and base & daemon == set()
    assert {"jax", "jaxlib", "fastapi", "uvicorn", "redis"} <= daemon
    for extra in ("test", "bench", "gpu"):  # what starts daemons installs them
        assert "xlacs[server]" in PYPROJECT["project"]["optional-dependencies"][extra], extra


def test_the_package_the_images_install_holds_every_package_of_the_source_tree():
    """packages.find installs only folders with an __init__.py, and each source root holds one package."""
    find = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    assert find["where"] == ["server", "client"] and "package-dir" not in PYPROJECT["tool"]["setuptools"]
    for root, top in (("client", "xlacs"), ("server", "xlacs_server")):
        assert [p.name for p in (files.ROOT / root).iterdir() if p.is_dir() and p.name != "__pycache__"] == [top]
        for module in (files.ROOT / root).rglob("*.py"):
            assert (module.parent / "__init__.py").exists(), module


def test_the_build_context_installs_every_module_and_data_file_of_the_source_tree(tmp_path):
    """What the images' `pip wheel .` makes of the files that .dockerignore sends to the builder."""
    context = tmp_path / "context"
    context.mkdir()
    for source in [v.split()[0] for v in files.dockerfile("cpu").values("COPY") if not v.startswith("--from")]:
        origin = files.ROOT / source
        if origin.is_dir():
            shutil.copytree(origin, context / source, ignore=lambda d, names: [
                n for n in names if dockerignored(str((pathlib.Path(d) / n).relative_to(files.ROOT)))])
        else:
            shutil.copy(origin, context / source)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "wheel"), str(context)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "wheel").glob("xlacs-*.whl")
    installed = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(["git", "ls-files", "client", "server"], cwd=files.ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    expected = {f.split("/", 1)[1] for f in tracked if not f.endswith(".pyi") and (files.ROOT / f).exists()}
    assert expected - installed == set()


# ---- Kubernetes


def test_k8s_manifests_validate_strictly_against_the_kubernetes_schemas():
    documents = files.k8s_documents()
    assert {d["kind"] for d in documents} >= {"Deployment", "Service", "ConfigMap", "Secret",
                                              "PodDisruptionBudget", "Kustomization"}
    for document in documents:
        if document["kind"] != "Kustomization":
            kubernetes_validate.validate(document, K8S_VERSION, strict=True)


def test_kustomization_lists_every_manifest_but_the_secret():
    (kustomization,) = files.k8s_kind("Kustomization")
    manifests = {p.name for p in files.K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == manifests - {"secret.yaml"}


def xlacs_deployments() -> dict[str, dict]:
    return {d["metadata"]["labels"]["xlacs.dev/pool"]: d for d in files.k8s_kind("Deployment")
            if d["metadata"]["name"].startswith("xlacs")}


def test_k8s_deployments_run_the_image_command_with_the_protocols_probes(dashboard):
    (config,) = [d for d in files.k8s_kind("ConfigMap") if d["metadata"]["name"] == "xlacs-config"]
    deployments = xlacs_deployments()
    assert set(deployments) == {"cpu", "gpu"}
    for pool, deployment in deployments.items():
        pod = deployment["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["image"] == f"xlacs:{pool}"
        assert parses_as_cli(files.dockerfile(pool).exec_form("ENTRYPOINT") + container["args"]) == "serve"
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports == {"grpc": DEFAULTS.port, "http": DEFAULTS.http_port}
        startup = container["startupProbe"]["grpc"]  # the gRPC server is up: JAX has started
        assert startup["port"] == DEFAULTS.port and startup["service"] == COMPILER_SERVICE
        for probe, route in (("readinessProbe", READY), ("livenessProbe", LIVE)):
            http = container[probe]["httpGet"]
            assert ports[http["port"]] == DEFAULTS.http_port
            assert_probe_answers(dashboard, http["path"], route)
        settings = Settings.from_env(config["data"])
        (models,) = [m for m in container["volumeMounts"] if m["mountPath"] == settings.model_repository]
        assert models["readOnly"] is True and models["name"] in {v["name"] for v in pod["volumes"]}
        assert container["envFrom"] == [{"configMapRef": {"name": "xlacs-config"}}]
        assert "cpu" in container["resources"]["requests"] and "memory" in container["resources"]["requests"]
        grace = Settings.from_env(config["data"]).shutdown_grace_s
        pause = int(container["lifecycle"]["preStop"]["exec"]["command"][1])
        assert pod["terminationGracePeriodSeconds"] > grace + pause
        assert pod["securityContext"]["runAsNonRoot"] is True
    gpu = deployments["gpu"]["spec"]["template"]["spec"]
    assert gpu["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] >= 1
    assert gpu["nodeSelector"] and {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} \
        in gpu["tolerations"]


def test_k8s_config_and_secret_feed_the_settings():
    (config,) = [d for d in files.k8s_kind("ConfigMap") if d["metadata"]["name"] == "xlacs-config"]
    (secret,) = files.k8s_kind("Secret")
    assert [v for v in config["data"] if not known_variable(v)] == []
    settings = Settings.from_env(config["data"])
    (redis,) = [s for s in files.k8s_kind("Service") if s["metadata"]["name"] == "redis"]
    assert settings.redis_url == f"redis://redis:{redis['spec']['ports'][0]['port']}/0"
    for deployment in xlacs_deployments().values():
        pod = deployment["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if "secret" in volumes[m["name"]]]
        assert volumes[mount["name"]]["secret"]["secretName"] == secret["metadata"]["name"]
        for path in (settings.cache_secret_file, settings.auth_tokens_file):
            directory, key = path.rsplit("/", 1)
            assert directory == mount["mountPath"] and key in secret["stringData"]


def test_k8s_headless_services_and_disruption_budgets_select_the_pods():
    deployments = xlacs_deployments()
    services = {s["metadata"]["name"]: s for s in files.k8s_kind("Service")}
    budgets = {b["metadata"]["name"]: b for b in files.k8s_kind("PodDisruptionBudget")}
    for pool, deployment in deployments.items():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        service = services[f"xlacs-{pool}"]
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"].items() <= labels.items()
        container_ports = {p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= container_ports
        assert budgets[f"xlacs-{pool}"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
