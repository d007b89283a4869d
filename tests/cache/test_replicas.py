"""`xlacs serve` replicas sharing one Redis: the second never compiles what the first did, a restarted one
loads from Redis, ids move between replicas, and 3 replicas x 16 concurrent Compiles make 1 XLA compile."""
import json
import os
import subprocess
import sys
from concurrent import futures

import numpy as np
import pytest
import tensorflow as tf

from tests.cache.conftest import SECRET, Graph, ServeProcess, dense_graph
from tests.conftest import RunningServer
from tests.models.keras_models import frozen_keras
from tests.oracle import assert_close
from xlacs.freeze import freeze
from xlacs_server.config import Settings


@pytest.fixture(scope="module")
def replicas(module_redis, tmp_path_factory):
    """Two replicas configured as a deployment would be: the Redis URL and the secret in the environment."""
    directory = tmp_path_factory.mktemp("replicas")
    env = {"XLACS_REDIS_URL": module_redis.url, "XLACS_CACHE_SECRET": SECRET}
    started = [ServeProcess(directory, env) for _ in range(2)]
    yield started
    for replica in started:
        replica.stop()


@pytest.fixture(scope="module")
def mobilenet():
    frozen, model = frozen_keras("MobileNetV2", (1, 224, 224, 3))
    x = np.random.default_rng(3).uniform(-1, 1, (1, 224, 224, 3)).astype(np.float32)
    return Graph(frozen, "mobilenet_v2"), x, model(x, training=False).numpy()


def tier_stats(client) -> dict:
    return {t.tier: t for t in client.stats().tiers}


def test_a_second_replica_serves_a_model_the_first_compiled_without_compiling(replicas, mobilenet):
    graph, x, want = mobilenet
    first, second = replicas
    with first.client() as a, second.client() as b:
        compiled = graph.compile(a)
        loaded = graph.compile(b)
        assert (compiled.cache, loaded.cache, loaded.id) == ("miss", "l2", compiled.id)
        got_a, got_b = compiled.execute([x])[0], loaded.execute([x])[0]
        np.testing.assert_array_equal(got_b, got_a)
        assert_close(got_b, want)
        assert b.stats().compiles == 0
        l2 = tier_stats(b)["l2"]
        assert (l2.hits, l2.misses, l2.errors, l2.rejected) == (1, 0, 0, 0) and l2.compile_ms_saved > 0


def test_a_restarted_replica_loads_from_redis_and_executes_ids_it_never_loaded(replicas, mobilenet):
    graph, x, want = mobilenet
    first = replicas[0]
    with first.client() as a:
        executable = graph.compile(a)
        first.stop()
        first.start()  # the same port: the client's channel reconnects to a replica that knows no ids
        got = executable.execute([x])[0]  # NOT_FOUND, then the client re-Compiles (an L2 hit) and retries
        assert_close(got, want)
        assert a.stats().compiles == 0 and tier_stats(a)["l2"].hits == 1
        assert graph.compile(a).cache == "l1"


def xlacs_compile_json(graph: Graph, address: str, tmp_path) -> dict:
    path = tmp_path / f"{graph.name}.pb"
    path.write_bytes(graph.frozen.graph_def)
    (feed, (dtype, shape)), = graph.frozen.feeds.items()
    result = subprocess.run(
        [sys.executable, "-m", "xlacs.cli", "compile", str(path), "--feed", f"{feed}={np.dtype(dtype).name}"
         f"[{','.join(map(str, shape))}]", "--fetch", graph.frozen.fetches[0], "--name", graph.name,
         "--server", address, "--json"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr + result.stdout
    return json.loads(result.stdout)


def test_xlacs_compile_json_names_the_tier_that_served(replicas, tmp_path):
    graph = dense_graph()
    first, second = replicas
    assert [xlacs_compile_json(graph, r.address, tmp_path)["cache"] for r in (first, second, second)] == \
        ["miss", "l2", "l1"]
    on_disk = dense_graph()
    for expected in ("miss", "disk"):  # two servers, one after the other, on one directory
        server = RunningServer(Settings(cache_dir=str(tmp_path / "cache")))
        try:
            assert xlacs_compile_json(on_disk, server.address, tmp_path)["cache"] == expected
        finally:
            server.stop()


def small_cnn() -> Graph:
    """Three convolutions and a dense layer: compiles in about a second, long enough for replicas to race."""
    rng = np.random.default_rng(4)
    kernels = [tf.constant(rng.normal(0, 0.3, shape).astype(np.float32))
               for shape in ((3, 3, 3, 16), (3, 3, 16, 32), (3, 3, 32, 32))]
    dense = tf.constant(rng.normal(0, 0.2, (32, 10)).astype(np.float32))

    def cnn(x):
        for kernel in kernels:
            x = tf.nn.relu(tf.nn.conv2d(x, kernel, strides=1, padding="SAME"))
            x = tf.nn.max_pool2d(x, 2, 2, "VALID")
        return tf.matmul(tf.reduce_mean(x, axis=[1, 2]), dense)
    return Graph(freeze(tf.function(cnn), tf.TensorSpec((2, 32, 32, 3), tf.float32)), "cnn")


def test_three_replicas_sixteen_concurrent_identical_compiles_each_compile_once(module_redis, tmp_path):
    # Every call gets a slot: the test is about the cache's single flight, not about admission control.
    env = {"XLACS_REDIS_URL": module_redis.url, "XLACS_CACHE_SECRET": SECRET, "XLACS_WORKERS": "32",
           "XLACS_MAX_CONCURRENT_COMPILES": "16", "XLACS_COMPILE_QUEUE": "4"}
    started = [ServeProcess(tmp_path, env) for _ in range(3)]
    graph = small_cnn()
    clients = [replica.client() for replica in started]
    try:
        with futures.ThreadPoolExecutor(48) as pool:
            calls = [pool.submit(graph.compile, c) for c in clients for _ in range(16)]
            results = [call.result() for call in calls]
        assert len({r.id for r in results}) == 1
        caches = [r.cache for r in results]
        # One replica compiles; each other one loads once from Redis; every other call is an L1 hit.
        assert {c: caches.count(c) for c in set(caches)} == {"miss": 1, "l2": 2, "l1": 45}
        assert sum(c.stats().compiles for c in clients) == 1
        outputs = [r.execute(graph.inputs())[0] for r in results[::16]]  # one per replica
        for out in outputs[1:]:
            np.testing.assert_array_equal(out, outputs[0])
    finally:
        for c in clients:
            c.close()
        for replica in started:
            replica.stop()


def test_xlacs_serve_with_redis_and_no_secret_says_what_is_missing(module_redis):
    env = {k: v for k, v in os.environ.items() if not k.startswith("XLACS_CACHE_SECRET")}
    result = subprocess.run([sys.executable, "-m", "xlacs.cli", "serve", "--server", "127.0.0.1:0",
                             "--redis-url", module_redis.url], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "xlacs serve: the Redis cache tier needs a secret" in result.stderr
    assert "Traceback" not in result.stderr
