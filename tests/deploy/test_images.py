"""The images' entry commands run directly on this machine with the compose environment: Redis with the
compose command line, the daemon with the Dockerfile's ENTRYPOINT + CMD, found healthy by its HEALTHCHECK."""
import re
import secrets
import subprocess
import time

import grpc
import httpx
import numpy as np
import pytest
import redis

from benchmarks.processes import RedisServer
from tests.deploy import files
from tests.deploy.daemon import Daemon, double_graph, process_environment
from xlacs import Client
from xlacs_server.config import Settings
from xlacs_server.daemon_process import free_port
from xlacs_server.dashboard import create_app
from xlacs_server.dashboard.http import HttpServer
import xlacs_server.daemon


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory):
    """Redis started with the compose service's command line, on a free loopback port and a scratch dir."""
    command = files.compose()["services"]["redis"]["command"]
    server = RedisServer(tmp_path_factory.mktemp("redis"), arguments=command[1:])  # command[0] is redis-server
    yield server.port
    server.stop()


def test_redis_runs_as_an_lru_cache_of_the_configured_size(redis_port):
    config = redis.Redis(port=redis_port, decode_responses=True).config_get("*")
    command = files.compose()["services"]["redis"]["command"]
    size = re.fullmatch(r"(\d+)([kmg])b", command[command.index("--maxmemory") + 1])
    assert int(config["maxmemory"]) == int(size[1]) * 1024 ** " kmg".index(size[2])
    assert config["maxmemory-policy"] == "allkeys-lru"
    assert (config["save"], config["appendonly"]) == ("", "no")


def container_environment(service: str, kind: str, redis_port: int, secret_dir) -> dict[str, str]:
    """What the container of a compose service sees: the image's ENV, then the service's environment, with
    the Redis host and the mounted secret files mapped onto this machine."""
    env = {k: v for k, v in files.dockerfile(kind).env.items() if k != "PATH"}
    env.update(files.environment(files.compose()["services"][service]))
    env["XLACS_REDIS_URL"] = env["XLACS_REDIS_URL"].replace("//redis:6379/", f"//127.0.0.1:{redis_port}/")
    env["XLACS_CACHE_DIR"] = str(secret_dir / "cache")
    for name, path in env.items():
        if path.startswith("/run/secrets/"):
            local = secret_dir / path.rsplit("/", 1)[1]
            local.write_text(secrets.token_hex(32) + "\n")
            env[name] = str(local)
    return env


def test_gpu_image_starts_and_probes_like_the_cpu_image():
    cpu, gpu = files.dockerfile("cpu"), files.dockerfile("gpu")
    for instruction in ("ENTRYPOINT", "CMD", "EXPOSE", "USER"):
        assert cpu.values(instruction) == gpu.values(instruction), instruction
    assert cpu.healthcheck[1] == gpu.healthcheck[1]


def test_the_image_command_serves_with_the_compose_environment_and_passes_its_healthcheck(redis_port, tmp_path):
    image = files.dockerfile("cpu")
    env = container_environment("xlacs", "cpu", redis_port, tmp_path)
    daemon = Daemon(image.exec_form("ENTRYPOINT") + image.exec_form("CMD"), env, tmp_path / "serve.log")
    try:
        options, command = image.healthcheck
        healthcheck = files.healthcheck_argv(command, daemon.env)
        assert healthcheck[healthcheck.index("--server") + 1] == daemon.address  # it follows XLACS_PORT
        # The server's health (""), which waits for the model repository as /v2/health/ready does
        # (tests/inference/test_readiness.py).
        assert healthcheck[healthcheck.index("--service") + 1] == ""
        deadline = time.monotonic() + int(options["start-period"].rstrip("s"))
        while (probe := subprocess.run(healthcheck, env=daemon.env, capture_output=True, text=True)).returncode:
            assert daemon.process.poll() is None, daemon.output
            assert time.monotonic() < deadline, f"unhealthy after the start period:\n{probe.stderr}\n{daemon.output}"
            time.sleep(float(options["start-interval"].rstrip("s")))
        assert probe.stdout.strip() == "SERVING"
        daemon.wait_logged("devices: cpu:0 (cpu)")  # the start-up log names the devices
        assert httpx.get(f"{daemon.http}/readyz", timeout=30).status_code == 200
        ready = compose_healthcheck(daemon.env)  # the compose file's own, on the protocol's readiness
        assert ready.returncode == 0, ready.stderr

        graph_def, feeds, fetches = double_graph()
        token = (tmp_path / "xlacs_auth_tokens").read_text().strip()
        with Client(daemon.address, timeout=120) as anonymous:
            with pytest.raises(grpc.RpcError) as denied:
                anonymous.compile(graph_def, feeds, fetches)
            assert denied.value.code() == grpc.StatusCode.UNAUTHENTICATED  # XLACS_AUTH_TOKENS_FILE was read
        with Client(daemon.address, timeout=120, token=token) as client:
            x = np.arange(6, dtype=np.float32).reshape(2, 3)
            (y,) = client.compile(graph_def, feeds, fetches, name="deploy_double")(x)
            np.testing.assert_array_equal(y, x * 2)
        shared = redis.Redis(port=redis_port)
        assert shared.dbsize() > 0, "nothing reached the Redis of XLACS_REDIS_URL"
    finally:
        assert daemon.terminate() == 0, daemon.output


def test_the_healthcheck_fails_when_no_daemon_answers():
    options, command = files.dockerfile("cpu").healthcheck
    env = process_environment({"XLACS_PORT": str(free_port())})
    probe = subprocess.run(files.healthcheck_argv(command, env), env=env, capture_output=True, text=True,
                           timeout=int(options["timeout"].rstrip("s")))
    assert probe.returncode != 0 and "UNAVAILABLE" in probe.stderr


def compose_healthcheck(env: dict[str, str]) -> subprocess.CompletedProcess:
    """The compose file's healthcheck of the xlacs service, run as Docker runs its CMD form (no shell)."""
    check = files.compose()["services"]["xlacs"]["healthcheck"]
    assert check["test"][0] == "CMD"
    return subprocess.run(check["test"][1:], env=env, capture_output=True, text=True,
                          timeout=int(check["timeout"].rstrip("s")))


def test_the_compose_healthcheck_fails_until_the_model_repository_has_loaded_and_without_a_daemon(tmp_path):
    """A daemon whose repository has not loaded (its load not started) answers /v2/health/ready 503."""
    service = xlacs_server.daemon.Daemon(Settings(cache_dir="", model_repository=str(tmp_path)))
    http = HttpServer(create_app(service), "127.0.0.1", 0)
    http.start()
    try:
        loading = compose_healthcheck(process_environment({"XLACS_HTTP_PORT": str(http.port)}))
        assert loading.returncode == 1 and "503" in loading.stderr, loading.stderr
        service.models.start()
        assert service.models.wait_ready(60)
        ready = compose_healthcheck(process_environment({"XLACS_HTTP_PORT": str(http.port)}))
        assert ready.returncode == 0, ready.stderr
    finally:
        http.stop()
        service.close()
    absent = compose_healthcheck(process_environment({"XLACS_HTTP_PORT": str(free_port())}))
    assert absent.returncode == 1 and "Connection refused" in absent.stderr, absent.stderr
