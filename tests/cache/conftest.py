"""Settings with the test secret, `xlacs serve` subprocesses, and small frozen graphs (the redis-server fixtures
are in tests/conftest.py)."""
from __future__ import annotations

import itertools
import os
import pathlib
import time

import numpy as np
import tensorflow as tf

from xlacs import Client, dtypes
from xlacs.freeze import FrozenGraph, freeze
from xlacs_server.config import Settings
from xlacs_server.daemon_process import DaemonProcess
from xlacs_server.pipeline.request import CompileSpec
from xlacs_server.service import CompilationService

SECRET = "a-test-secret-of-more-than-16-bytes"
_names = itertools.count()


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


# Enough layers (~870 StableHLO ops) that XLA's optimizing compile takes a second, so a test sees the quick program
# first; SMALL's ~150 ops are under the default tiered_min_ops.
LAYERS, SMALL = 60, 10


def deep_graph(seed: int, layers: int = LAYERS, batch: int | None = 4) -> Graph:
    """A stack of dense layers, each with its own weights and activation (~14.5 StableHLO ops a layer); a batch of
    None is known only at Execute."""
    rng = np.random.default_rng(seed)
    weights = [tf.constant(rng.standard_normal((32, 32)).astype(np.float32) / 6) for _ in range(layers)]

    def deep(x):
        for i, w in enumerate(weights):
            y = tf.matmul(x, w) + 0.1 * i
            x = tf.tanh(y) * tf.sigmoid(y) + x if i % 2 else tf.nn.relu(y) - 0.5 * tf.exp(-tf.abs(y))
        return x
    return Graph(freeze(tf.function(deep), tf.TensorSpec((batch, 32), tf.float32)), "deep")


class ServeProcess(DaemonProcess):
    """`xlacs serve` as a replica is deployed, logging into `directory`; a stop must exit 0."""

    def __init__(self, directory: pathlib.Path, env: dict, port: int = 0):
        super().__init__(directory / f"serve-{next(_names)}.log", env, port)

    def stop(self) -> None:
        assert super().stop() == 0, self.log.read_text()


def prepared_records(redis_server) -> list[bytes]:
    return redis_server.client().keys("xlacs:prepared.*")


def kept(redis_server) -> bytes:
    """The name of the first record of prepared weights in Redis, once one is there: a replica stores them after its
    Compile answered (docs/cache.md, Prepared weights)."""
    while not prepared_records(redis_server):
        time.sleep(0.05)
    return prepared_records(redis_server)[0]
