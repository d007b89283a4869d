"""The CPU image as built from the repository: its user, its health check, its size, no secret in any layer, and
its layers: a change of the source rebuilds only the top one."""
import shutil
import subprocess
import tarfile
import time

from tests.stack.conftest import IMAGE_UID, PROJECT, ROOT, SECRETS, docker

IMAGE = "xlacs:cpu"


def test_the_image_runs_as_its_unprivileged_user(stack):
    config = stack.inspect(IMAGE)["Config"]
    assert config["User"] == f"{IMAGE_UID}:{IMAGE_UID}"
    for container in stack.containers("xlacs"):
        top = docker("top", container, "-o", "pid,uid,args")  # every process of the container, tini's too
        processes = [line.split(None, 2) for line in top.splitlines()[1:]]
        assert any("xlacs serve" in args for _, _, args in processes), top
        assert all(uid == str(IMAGE_UID) for _, uid, _ in processes), top


def test_the_image_alone_turns_healthy_by_its_own_healthcheck_and_exits_0_on_stop(stack):
    """`docker run` of the image with nothing set: embedded defaults, its HEALTHCHECK (the compose file replaces it
    by the protocol's readiness) asking the gRPC health service."""
    healthcheck = stack.inspect(IMAGE)["Config"]["Healthcheck"]
    assert healthcheck["Test"][0] == "CMD-SHELL" and healthcheck["Test"][1].startswith("xlacs health "), healthcheck
    container = docker("run", "-d", "--init", IMAGE).strip()
    try:
        start = time.monotonic()
        while (health := stack.inspect(container)["State"]["Health"])["Status"] != "healthy":
            assert health["Status"] == "starting" and time.monotonic() - start < 120, health
            time.sleep(0.5)
        stack.report["image_start_to_healthy_s"] = round(time.monotonic() - start, 1)
        assert health["Log"][-1]["ExitCode"] == 0, health
        docker("stop", container, timeout=120)
        assert stack.inspect(container)["State"]["ExitCode"] == 0
    finally:
        docker("rm", "-f", container)


def test_no_layer_or_history_entry_holds_a_secret(stack, tmp_path):
    """Neither the run-time secrets' values nor any file under /run/secrets, where the build mounts pip's CA bundle
    (the build secret pip_ca) for the RUNs that download."""
    values = {path.name: path.read_bytes().strip() for path in SECRETS.iterdir() if path.name != ".gitignore"}
    assert {"cache_secret", "auth_tokens"} <= values.keys()
    history = docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", IMAGE)
    for name, value in values.items():
        assert value not in history.encode(), name
    environment = stack.inspect(IMAGE)["Config"]["Env"]
    assert not [e for e in environment if e.startswith("PIP_CERT=") or "/run/secrets" in e], environment
    archive = tmp_path / "image.tar"
    subprocess.run(["docker", "save", "-o", str(archive), IMAGE], check=True, timeout=600)
    found, layers = [], 0
    with tarfile.open(archive) as image:
        for member in image:
            if not member.isfile() or not (member.name.endswith("layer.tar") or member.name.startswith("blobs/")):
                continue
            try:
                layer = tarfile.open(fileobj=image.extractfile(member))
            except tarfile.ReadError:  # the manifest and config blobs of an OCI layout
                continue
            layers += 1
            for entry in layer:
                if entry.name.lstrip("./").startswith("run/secrets/") and entry.isfile():
                    found.append(entry.name)
                if entry.isfile() and 0 < entry.size < 4 << 20:
                    data = layer.extractfile(entry).read()
                    found += [f"{name} in {entry.name}" for name, value in values.items() if value in data]
    assert layers >= 3 and not found, found
    stack.report["cpu_image_bytes"] = stack.inspect(IMAGE)["Size"]


def test_a_source_change_rebuilds_only_the_layer_of_the_package(stack, tmp_path):
    """The build context with a comment added to server/, built as the stack's image was: every layer but one, the
    top one with content, xlacs's package (a few MB), is the stack's image's own, the venv of the dependencies
    included."""
    for name in (".dockerignore", "docker-compose.yml", "pyproject.toml", "README.md", "deploy/docker/Dockerfile.cpu"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    for source in ("client", "server"):
        shutil.copytree(ROOT / source, tmp_path / source, ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "server" / "xlacs_server" / "__init__.py", "a") as module:
        module.write("# a change of the source alone\n")
    touched = f"{PROJECT}:touched"
    start = time.monotonic()
    build = subprocess.run(["docker", "compose", "-p", f"{PROJECT}-touched", "build", "xlacs"], cwd=tmp_path,
                           env={**stack.env, "CPU_IMAGE": touched}, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-4000:]
    stack.report["cpu_image_rebuild_s"] = round(time.monotonic() - start, 1)
    try:
        before, after = (stack.inspect(image)["RootFS"]["Layers"] for image in (IMAGE, touched))
        assert len(after) == len(before)
        assert len([layer for layer in after if layer not in before]) == 1, (before, after)
        history = docker("history", "--no-trunc", "--human=false", "--format", "{{.Size}}\t{{.CreatedBy}}", touched)
        size, created_by = next(line.split("\t", 1) for line in history.splitlines() if line.split("\t")[0] != "0")
        assert "pip install" in created_by and "xlacs --help" in created_by, created_by
        assert int(size) < 16 << 20, history
    finally:
        docker("rmi", touched)
