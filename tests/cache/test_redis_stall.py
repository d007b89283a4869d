"""A Redis that stops answering (SIGSTOP: connections open, nothing comes back) costs one short timeout per
backoff, not one per call: L1 hits never wait on it (nor behind the compiles of misses, over gRPC), and misses
go on without L2 behind a circuit breaker."""
import signal
import threading
import time

from tests.cache.conftest import dense_graph, settings
from tests.cache.test_tiers import redis_service, tier
from tests.conftest import RunningServer
from xlacs import Client
from xlacs_server.cache import redis_store


def test_a_stopped_redis_stalls_neither_hits_nor_misses(redis_server):
    service = redis_service(redis_server)
    hot = dense_graph(5)
    assert hot.run(service)[0] == "miss"
    cold = [dense_graph(rows) for rows in (6, 7, 8, 9, 10, 11)]
    redis_server.process.send_signal(signal.SIGSTOP)
    try:
        results, hit_ms = {}, []

        def miss(graph):
            results[graph.name] = graph.run(service)[0]

        threads = [threading.Thread(target=miss, args=(g,)) for g in cold]
        start = time.monotonic()
        for t in threads:
            t.start()
        for _ in range(20):  # L1 hits while the misses meet the stalled Redis
            began = time.perf_counter()
            assert service.compile(hot.spec()).cache == "l1"
            hit_ms.append((time.perf_counter() - began) * 1e3)
        for t in threads:
            t.join(60)
        misses_s = time.monotonic() - start
    finally:
        redis_server.process.send_signal(signal.SIGCONT)
    l2 = tier(service, "l2")
    assert sorted(hit_ms)[len(hit_ms) // 2] < 50 and max(hit_ms) < 500, hit_ms
    assert list(results.values()) == ["miss"] * len(cold)
    # The calls already under way when Redis stopped each wait one socket timeout; after that one probe per
    # backoff waits, and the other calls skip Redis at once.
    assert l2.skipped > 0 and l2.errors <= len(cold) + 2, (l2.skipped, l2.errors)
    assert misses_s < 4 * redis_store.SOCKET_TIMEOUT_S + 30


def test_over_grpc_an_l1_hit_stays_fast_while_redis_is_stopped_and_misses_compile(redis_server):
    server = RunningServer(settings(redis_url=redis_server.url, max_concurrent_compiles=1, compile_queue=6))
    hot = dense_graph(12)
    cold = [dense_graph(rows) for rows in (13, 14, 15, 16)]
    try:
        with Client(server.address, timeout=120) as client:
            assert hot.compile(client).cache == "miss"
            redis_server.process.send_signal(signal.SIGSTOP)
            try:
                misses = [threading.Thread(target=hot_or_cold.compile, args=(client,)) for hot_or_cold in cold]
                for t in misses:
                    t.start()
                hit_ms = []
                for _ in range(20):
                    began = time.perf_counter()
                    assert hot.compile(client).cache == "l1"
                    hit_ms.append((time.perf_counter() - began) * 1e3)
                for t in misses:
                    t.join(120)
            finally:
                redis_server.process.send_signal(signal.SIGCONT)
    finally:
        server.stop()
    assert sorted(hit_ms)[len(hit_ms) // 2] < 50, hit_ms
