"""Tiered compilation (compile/tier_up.py) over real gRPC and a real redis-server: a cold compile of a large
program answers with its quick program, the optimized one replaces it, and only the optimized one reaches the
shared tier, which the compile's lease guards until then."""
import numpy as np
import pytest
import tensorflow as tf

from tests.cache.conftest import LAYERS, SECRET, SMALL, Graph, deep_graph
from tests.conftest import RunningServer
from tests.oracle import assert_close
from xlacs import Client
from xlacs.freeze import freeze
from xlacs_server.compile.tier_up import op_count
from xlacs_server.config import Settings


def run_tf(graph: Graph, x: np.ndarray) -> np.ndarray:
    with tf.Graph().as_default() as g:
        tf.compat.v1.import_graph_def(tf.compat.v1.GraphDef.FromString(graph.frozen.graph_def), name="")
        with tf.compat.v1.Session(graph=g) as session:
            return session.run(graph.frozen.fetches[0], {next(iter(graph.frozen.feeds)): x})


@pytest.fixture
def tiered():
    running = RunningServer(Settings(cache_dir="", tiered_min_ops=100))
    yield running
    running.stop()


def test_a_cold_compile_answers_with_the_quick_program_and_the_optimized_one_replaces_it(tiered):
    graph = deep_graph(0)
    x = np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)
    want = run_tf(graph, x)
    with Client(tiered.address, timeout=600) as client:
        executable = graph.compile(client)
        assert (executable.cache, executable.tier) == ("miss", "quick")
        assert op_count(tiered.service.tiers.l1.values()[0].stablehlo) >= 100
        assert_close(executable(x)[0], want)
        first_id = executable.id
        executable.wait_optimized()
        assert (executable.tier, executable.id) == ("optimized", first_id)
        info = client.executable_info(executable.id)
        assert info.tier == "optimized" and info.stage_ms["optimize"] > 0 and info.stage_ms["compile"] > 0
        assert_close(executable(x)[0], want)
        again = graph.compile(client)
        assert (again.cache, again.tier) == ("l1", "optimized")
    l1 = tiered.service.tiers.l1
    assert l1.stats.bytes == sum(e.size_bytes for e in l1.values())  # re-counted after the swap


def test_a_small_program_and_a_daemon_with_tiering_off_compile_optimized_at_once():
    # SMALL's program is under the default's 500 ops; tiering off leaves any program alone.
    for settings, layers in ((Settings(cache_dir=""), SMALL), (Settings(cache_dir="", tiered_min_ops=0), LAYERS)):
        running = RunningServer(settings)
        try:
            with Client(running.address, timeout=600) as client:
                executable = deep_graph(2, layers).compile(client)
                assert (executable.cache, executable.tier) == ("miss", "optimized")
                assert "optimize" not in client.executable_info(executable.id).stage_ms
        finally:
            running.stop()


def test_a_cold_compile_that_waits_for_the_optimized_program_compiles_it_at_once(tiered):
    graph = deep_graph(8)
    with Client(tiered.address, timeout=600) as client:
        executable = client.compile(graph.frozen.graph_def, graph.frozen.feeds, graph.frozen.fetches,
                                    name=graph.name, wait_optimized=True)
        assert (executable.cache, executable.tier) == ("miss", "optimized")
        assert "optimize" not in client.executable_info(executable.id).stage_ms  # no quick program first
        assert client.stats().compiles == 1


def test_feeds_of_unknown_dims_that_wait_compile_each_bucket_optimized(tiered):
    graph = deep_graph(9, batch=None)
    x = np.random.default_rng(10).standard_normal((3, 32)).astype(np.float32)
    with Client(tiered.address, timeout=600) as client:
        tiered_id = graph.compile(client).id
        executable = client.compile(graph.frozen.graph_def, graph.frozen.feeds, graph.frozen.fetches,
                                    name=graph.name, wait_optimized=True)
        assert executable.id != tiered_id and executable.tier == ""  # its buckets compile at the Executes
        assert_close(executable(x)[0], run_tf(graph, x))
    bucket, = tiered.service.tiers.l1.values()
    assert bucket.tier == "optimized" and "optimize" not in bucket.stage_ms  # compiled optimized at once


def test_the_shared_tier_gets_the_optimized_program_and_a_replica_waits_for_it(redis_server):
    redis_settings = Settings(cache_dir="", tiered_min_ops=100, redis_url=redis_server.url, cache_secret=SECRET)
    first, second = RunningServer(redis_settings), RunningServer(redis_settings)
    graph = deep_graph(3)
    x = np.random.default_rng(4).standard_normal((4, 32)).astype(np.float32)
    try:
        with Client(first.address, timeout=600) as a, Client(second.address, timeout=600) as b:
            compiled = graph.compile(a)
            assert compiled.tier == "quick"
            assert not redis_server.client().keys("xlacs:entry:*")  # not the quick program
            # The first daemon holds the key's lease until its optimized program is stored: the second waits and
            # loads that instead of compiling.
            loaded = graph.compile(b)
            assert (loaded.cache, loaded.tier, b.stats().compiles) == ("l2", "optimized", 0)
            assert len(redis_server.client().keys("xlacs:entry:*")) == 1
            np.testing.assert_array_equal(loaded(x)[0], compiled(x)[0])  # both run the optimized program now
            optimized = a.executable_info(compiled.id)
            assert optimized.tier == "optimized"
            # What the second daemon's hit saved counts the optimizing compile too.
            saved = {t.tier: t for t in b.stats().tiers}["l2"].compile_ms_saved
            assert saved >= optimized.stage_ms["optimize"] + optimized.stage_ms["compile"]
    finally:
        first.stop()
        second.stop()


def test_a_download_waits_for_the_optimized_program(tiered):
    graph = deep_graph(5)
    x = np.random.default_rng(6).standard_normal((4, 32)).astype(np.float32)
    with Client(tiered.address, timeout=600) as client:
        executable = graph.compile(client)
        assert executable.tier == "quick"
        local = executable.local()
        assert client.executable_info(executable.id).tier == "optimized"
        assert local.runs == "local", local.reason
        assert_close(local(x)[0], run_tf(graph, x))


def test_a_program_with_a_loop_is_never_tiered(tiered):
    deep = deep_graph(7)

    def loop(x):
        tf.import_graph_def(tf.compat.v1.GraphDef.FromString(deep.frozen.graph_def), {next(iter(deep.frozen.feeds)): x},
                            name="deep")
        y = tf.compat.v1.get_default_graph().get_tensor_by_name("deep/" + deep.frozen.fetches[0])
        return tf.while_loop(lambda i, v: i < 50, lambda i, v: (i + 1, tf.tanh(v) * 1.01 + 0.1), (0, y))[1]
    graph = Graph(freeze(tf.function(loop), tf.TensorSpec((4, 32), tf.float32)), "loop")
    with Client(tiered.address, timeout=600) as client:
        executable = graph.compile(client)
        assert (executable.cache, executable.tier) == ("miss", "optimized")  # runs in an execution worker
        assert op_count(tiered.service.tiers.l1.values()[0].stablehlo) >= 100
