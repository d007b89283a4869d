"""The processes a run starts on loopback: a redis-server without persistence and `xlacs serve` daemons, each
stopped by the run that started it. The tests start their redis-servers here too."""
from __future__ import annotations

import itertools
import pathlib
import shutil
import subprocess
import time
from typing import Sequence

import redis

from xlacs import Client
from xlacs_server.daemon_process import DaemonProcess, free_port

CACHE_SECRET = "benchmark-cache-secret-of-more-than-16-bytes"
# Sized for the benchmark's clients rather than for production: 64 concurrent Execute calls must queue, not
# fail fast, and a 512 MB input must be admitted.
SERVE_ENV = {"XLACS_WORKERS": "128", "XLACS_EXECUTE_QUEUE": "96", "XLACS_MAX_INPUT_BYTES": str(1 << 30),
             "XLACS_HTTP_PORT": "0", "XLACS_CACHE_DIR": ""}
_logs = itertools.count()
REDIS_START_S = 30  # the bound on its wait for PING: a loaded machine starts it slowly


class RedisServer:
    """redis-server on a free loopback port, with its files and log in `directory`, for the benchmarks and the tests
    alike (this module imports no pytest). `arguments` default to no persistence, so that a restart (`kill()`,
    `start()`) comes back empty, as after a crash; a deployment's command line may replace them."""

    def __init__(self, directory: pathlib.Path, arguments: Sequence[str] = ("--save", "", "--appendonly", "no")):
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            raise RuntimeError("redis-server is not installed: scripts/test and scripts/bench install it "
                               "(apt package redis-server)")
        self.directory, self.arguments = directory, list(arguments)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log = directory / "redis.log"
        self.start()

    def start(self) -> None:
        with open(self.log, "a") as out:
            self.process = subprocess.Popen(
                [self.binary, *self.arguments, "--port", str(self.port), "--bind", "127.0.0.1",
                 "--dir", str(self.directory)], stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + REDIS_START_S
        while not self._ping():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {self.port}:\n{self.log.read_text()}")
            time.sleep(0.05)

    def _ping(self) -> bool:
        try:
            return self.client().ping()
        except redis.ConnectionError:
            return False

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=5)

    def flush(self) -> None:
        redis.Redis.from_url(self.url, socket_timeout=30).flushall()

    def kill(self) -> None:
        """SIGKILL, as a crash ends it."""
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


class ServeProcess(DaemonProcess):
    """`xlacs serve` with the benchmark's settings (SERVE_ENV); `env` adds XLACS_* settings."""

    def __init__(self, directory: pathlib.Path, env: dict | None = None):
        super().__init__(directory / f"serve-{next(_logs)}.log", {**SERVE_ENV, **(env or {})})

    def client(self) -> Client:
        return super().client(timeout=1800)

    def warm_up(self, model) -> None:
        """Compiles and runs `model` (a benchmarks.models.Model): a process's first XLA compile pays for
        initialisation that no later one does, and the measured compiles must not."""
        with self.client() as client:
            model.compile(client)(*model.inputs)

def redis_env(redis_server: RedisServer) -> dict:
    return {"XLACS_REDIS_URL": redis_server.url, "XLACS_CACHE_SECRET": CACHE_SECRET}
