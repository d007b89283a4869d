"""A real redis-server on a free port (a test fails, never skips, when it cannot start), `xlacs serve`
subprocesses, and small frozen graphs."""
from __future__ import annotations

import itertools
import os
import pathlib
import shutil
import subprocess
import time

import numpy as np
import pytest
import redis
import tensorflow as tf

from xlacs import Client, dtypes
from xlacs.freeze import FrozenGraph, freeze
from xlacs_server.config import Settings
from xlacs_server.daemon_process import DaemonProcess, free_port
from xlacs_server.service import CompilationService, CompileSpec

SECRET = "a-test-secret-of-more-than-16-bytes"
_names = itertools.count()


class RedisServer:
    """redis-server without persistence: a restart comes back empty, as after a crash."""

    def __init__(self, directory: pathlib.Path):
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            pytest.fail("redis-server is not installed: scripts/test installs it (apt package redis-server)")
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        log = open(self.directory / "redis.log", "a")
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.directory)], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            try:
                if self.client().ping():
                    return
            except redis.ConnectionError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"redis-server did not start on port {self.port}:\n"
                            f"{(self.directory / 'redis.log').read_text()}")
            time.sleep(0.05)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=5)


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path)
    yield server
    server.kill()


@pytest.fixture(scope="module")
def module_redis(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.kill()


def settings(**overrides) -> Settings:
    """No directory tier unless asked for; a secret when Redis is used."""
    values = {"cache_dir": "", **({"cache_secret": SECRET} if overrides.get("redis_url") else {}), **overrides}
    return Settings(**values)


class Graph:
    """A small frozen TF graph under a name no other test uses, to find it on the dashboard. The name is not in
    the cache key: a test that needs a miss uses a program that no earlier compile on its tiers had."""

    def __init__(self, frozen: FrozenGraph, prefix: str):
        self.frozen = frozen
        self.name = f"{prefix}_{os.getpid()}_{next(_names)}"

    def spec(self) -> CompileSpec:
        return CompileSpec(self.frozen.graph_def,
                           [(n, dtypes.from_numpy(np.dtype(d)), tuple(s)) for n, (d, s) in self.frozen.feeds.items()],
                           list(self.frozen.fetches), graph_name=self.name)

    def inputs(self) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(0)
        return {n: rng.standard_normal(s).astype(d) for n, (d, s) in self.frozen.feeds.items()}

    def compile(self, client: Client):
        return client.compile(self.frozen.graph_def, self.frozen.feeds, self.frozen.fetches, name=self.name)

    def run(self, service: CompilationService):
        """(cache tier, outputs) of compiling and executing on an in-process service."""
        result = service.compile(self.spec())
        return result.cache, service.execute(result.loaded.id, self.inputs())[1]


def dense_graph(rows: int = 4) -> Graph:
    """tanh(x @ w + b) with a lifted weight: exercises weights bound after a load."""
    w = tf.constant(np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32))

    def dense(x):
        return tf.tanh(tf.matmul(x, w) + 0.5)
    return Graph(freeze(tf.function(dense), tf.TensorSpec((rows, 8), tf.float32)), "dense")


class ServeProcess(DaemonProcess):
    """`xlacs serve` as a replica is deployed, logging into `directory`; a stop must exit 0."""

    def __init__(self, directory: pathlib.Path, env: dict, port: int = 0):
        super().__init__(directory / f"serve-{next(_names)}.log", env, port)

    def stop(self) -> None:
        assert super().stop() == 0, self.log.read_text()
