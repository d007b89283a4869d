"""The compose stack of docker-compose.yml, built and brought up on this machine as deploy/README.md tells users:
secrets made as its section 3 says, `docker compose build`, then `up` with two replicas. Only the image sources
differ: the registry's python, redis and haproxy images are stand-ins made from Debian's packages
(scripts/deploy-bases), and the load balancer publishes its ports on 127.0.0.1, on free ports.

Needs a Docker Engine >= 25 with compose v2 (scripts/docker-engine). XLACS_STACK_KEEP=1 leaves the stack up at the
end, and XLACS_STACK_INFO names a file that gets its addresses as JSON (scripts/deploy-check --keep)."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import time

import httpx
import pytest

from tests.deploy import files
from tests.model_repository import Built, saved_model
from xlacs import Client
from xlacs_server.daemon_process import free_port

ROOT = files.ROOT
PROJECT = "xlacs-check"
BASES = {"PYTHON_IMAGE": "xlacs-local/python:bookworm", "REDIS_IMAGE": "xlacs-local/redis:bookworm",
         "LB_IMAGE": "xlacs-local/haproxy:bookworm"}
HOST_CA = pathlib.Path("/etc/ssl/certs/ca-certificates.crt")
SECRETS = ROOT / "deploy" / "secrets"
IMAGE_UID = 10001  # the images' user (deploy/docker/Dockerfile.*)
REPLICAS = 2
HEALTHY_TIMEOUT_S = 300
REPORT = ROOT / "test-output" / "deploy-report.json"


def make_secrets() -> None:
    """deploy/README.md's section 3, for a checkout that has none yet: readable by the image's user alone."""
    for name in ("cache_secret", "auth_tokens"):
        path = SECRETS / name
        if not path.exists():
            subprocess.run(f"umask 077 && openssl rand -hex 32 > {path} && chown {IMAGE_UID} {path}", shell=True,
                           check=True)


class Stack:
    """The running compose project: compose and docker commands on it, and clients through its load balancer."""

    def __init__(self, env: dict[str, str], models: Built):
        self.env = env
        self.models = models
        self.grpc = f"127.0.0.1:{env['LB_GRPC_PORT']}"
        self.http = f"127.0.0.1:{env['LB_HTTP_PORT']}"
        self.token = (SECRETS / "auth_tokens").read_text().split()[0]
        self.report: dict[str, object] = {}

    def compose(self, *args: str, timeout: float = 600) -> str:
        done = subprocess.run(["docker", "compose", "-p", PROJECT, *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"docker compose {' '.join(args)} failed:\n{done.stderr[-4000:]}"
        return done.stdout

    def containers(self, service: str) -> list[str]:
        """The ids of the service's running containers, in the order of their replica number."""
        ids = self.compose("ps", "-q", service).split()
        return sorted(ids, key=lambda c: int(self.inspect(c)["Config"]["Labels"]["com.docker.compose.container-number"]))

    @staticmethod
    def inspect(name: str) -> dict:
        """`docker inspect` of a container or an image."""
        return json.loads(docker("inspect", name))[0]

    def ip(self, container: str) -> str:
        """The container's own address on the stack's network."""
        (network,) = self.inspect(container)["NetworkSettings"]["Networks"].values()
        return network["IPAddress"]

    def address(self, container: str) -> str:
        """The gRPC address of that one replica."""
        return f"{self.ip(container)}:50051"

    def client(self, address: str | None = None, **kwargs) -> Client:
        return Client(address or self.grpc, token=self.token, **kwargs)

    def http_client(self) -> httpx.Client:
        return httpx.Client(base_url=f"http://{self.http}", headers={"Authorization": f"Bearer {self.token}"},
                            timeout=60)

    def wait_healthy(self, service: str, count: int, timeout: float = HEALTHY_TIMEOUT_S) -> float:
        """Seconds until `count` containers of the service run and are healthy (their HEALTHCHECK)."""
        start = time.monotonic()
        while True:
            states = [self.inspect(c)["State"] for c in self.containers(service)]
            healthy = [s for s in states if s.get("Health", {}).get("Status") == "healthy"]
            if len(healthy) == count == len(states):
                return time.monotonic() - start
            assert time.monotonic() - start < timeout, f"{service}: {states} after {timeout} s"
            time.sleep(0.5)

    def scale(self, replicas: int) -> float:
        """Seconds until the service xlacs has `replicas` healthy replicas."""
        self.compose("up", "-d", "--no-recreate", "--no-build", "--scale", f"xlacs={replicas}", "xlacs")
        return self.wait_healthy("xlacs", replicas)

    def lb_log(self) -> str:
        return self.compose("logs", "--no-color", "lb")


def docker(*args: str, timeout: float = 300) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"docker {' '.join(args)} failed:\n{done.stderr[-4000:]}"
    return done.stdout


@pytest.fixture(scope="package")  # down once tests/stack is done, not at the end of the whole suite
def stack(tmp_path_factory) -> Stack:
    try:
        docker("info", timeout=30)
    except (AssertionError, FileNotFoundError) as e:
        raise RuntimeError(f"no Docker Engine answers: run scripts/docker-engine ({e})") from None
    for image in BASES.values():
        if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode:
            raise RuntimeError(f"the local base {image} is missing: run scripts/deploy-bases")
    make_secrets()
    models = tmp_path_factory.mktemp("models")
    built = saved_model(models)
    subprocess.run(["chmod", "-R", "a+rX", str(models)], check=True)  # the replicas read it as their own user
    env = {**os.environ, **BASES, "LB_ADDRESS": "127.0.0.1", "MODEL_REPOSITORY_DIR": str(models),
           "XLACS_MODEL_REPOSITORY": "/models",
           **{name: str(free_port()) for name in ("LB_GRPC_PORT", "LB_HTTP_PORT", "LB_GPU_GRPC_PORT",
                                                   "LB_GPU_HTTP_PORT")}}
    if HOST_CA.exists():
        env["PIP_CA_FILE"] = str(HOST_CA)
    running = Stack(env, built)
    start = time.monotonic()
    running.compose("build", "xlacs", timeout=1800)
    running.report["cpu_image_build_s"] = round(time.monotonic() - start, 1)
    keep = os.environ.get("XLACS_STACK_KEEP") == "1"
    try:
        start = time.monotonic()
        running.compose("up", "-d", "--scale", f"xlacs={REPLICAS}", "--wait", "--wait-timeout",
                        str(HEALTHY_TIMEOUT_S))
        running.report["up_to_healthy_s"] = round(time.monotonic() - start, 1)
        yield running
    except Exception as e:
        keep = False  # a stack that did not come up, or broke, is no use to probe
        raise AssertionError(f"{e}\n--- the stack's last log lines:\n"
                             f"{running.compose('logs', '--no-color', '--tail', '30')}") from e
    finally:
        REPORT.parent.mkdir(exist_ok=True)
        REPORT.write_text(json.dumps(running.report, indent=1) + "\n")
        if keep:
            running.scale(REPLICAS)
            if info := os.environ.get("XLACS_STACK_INFO"):
                pathlib.Path(info).write_text(json.dumps({"grpc": running.grpc, "http": running.http,
                                                          "project": PROJECT}) + "\n")
        else:
            running.compose("down", "--volumes", "--timeout", "60")
