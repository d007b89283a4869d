"""A replica stopped (SIGTERM, as an orchestrator stops it) while its tier-ups are pending finishes them within its
shutdown grace and stores their optimized programs (compile/tier_up.py, TierUp.close): a fresh replica sharing
the Redis loads them, compiling nothing."""
import numpy as np

from tests.cache.conftest import LAYERS, SECRET, deep_graph
from tests.compile.test_tier_up import run_tf
from tests.oracle import assert_close
from xlacs_server.daemon_process import DaemonProcess


def test_the_tier_ups_pending_at_sigterm_are_stored_for_the_next_replica(redis_server, tmp_path):
    env = {"XLACS_REDIS_URL": redis_server.url, "XLACS_CACHE_SECRET": SECRET, "XLACS_TIERED_MIN_OPS": "100"}
    # Four programs: their tier-ups queue on one worker, and each optimized compile takes two to three times its
    # quick one, so at least two are still to come when the last quick answer arrives.
    graphs = [deep_graph(31 + i, LAYERS + i) for i in range(4)]
    x = np.random.default_rng(5).standard_normal((4, 32)).astype(np.float32)
    daemon = DaemonProcess(tmp_path / "stopped.log", env)
    try:
        with daemon.client() as client:
            assert [g.compile(client).tier for g in graphs] == ["quick"] * len(graphs)
            assert len(redis_server.client().keys("xlacs:entry:*")) < len(graphs)  # optimized programs to come
    finally:
        assert daemon.stop() == 0
    log = daemon.log.read_text()
    assert "tier-up(s) pending get up to" in log and "dropped" not in log, log
    fresh = DaemonProcess(tmp_path / "fresh.log", env)
    try:
        with fresh.client() as client:
            for graph in graphs:
                loaded = graph.compile(client)
                assert (loaded.cache, loaded.tier) == ("l2", "optimized")
                assert_close(loaded(x)[0], run_tf(graph, x))
            assert client.stats().compiles == 0
    finally:
        fresh.stop()


def test_a_tier_up_that_the_grace_leaves_no_time_is_dropped_and_logged(redis_server, tmp_path):
    env = {"XLACS_REDIS_URL": redis_server.url, "XLACS_CACHE_SECRET": SECRET, "XLACS_TIERED_MIN_OPS": "100",
           "XLACS_SHUTDOWN_GRACE_S": "0"}
    daemon = DaemonProcess(tmp_path / "stopped.log", env)
    try:
        with daemon.client() as client:
            assert deep_graph(33, LAYERS + 2).compile(client).tier == "quick"
    finally:
        assert daemon.stop() == 0
    assert "1 tier-up(s) dropped" in daemon.log.read_text()
    assert not redis_server.client().keys("xlacs:entry:*")  # nothing quick reached the shared tier
