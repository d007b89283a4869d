"""The tiers against a real redis-server and a real directory: hits, misses, refused entries, limits, leases,
and Redis failing under traffic (in-process services; tests/cache/test_replicas.py runs `xlacs serve`)."""
import logging
import os
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from tests.cache.conftest import SECRET, Graph, dense_graph, settings
from xlacs.freeze import freeze
from xlacs_server.cache.entry import decode, encode
from xlacs_server.cache.redis_store import BACKOFF_MAX_S
from xlacs_server.cache.secret import CacheConfigError, generated_secret_path, secret_id
from xlacs_server.daemon_process import free_port
from xlacs_server.errors import Cancelled
from xlacs_server.service import CompilationService


def redis_service(redis_server, **overrides) -> CompilationService:
    return CompilationService(settings(redis_url=redis_server.url, **overrides))


def tier(service: CompilationService, name: str):
    return {t.tier: t.stats for t in service.tiers}[name]


def entry_key(graph, service) -> str:
    """The Redis key of the graph's entry (under the test secret's id); finds the cache key by compiling on a
    tierless service."""
    return f"xlacs:entry:{secret_id(SECRET.encode())}.{service.compile(graph.spec()).loaded.executable.key}"


def test_miss_then_l1_then_l2_in_another_service_without_compiling(redis_server):
    graph = dense_graph()
    first = redis_service(redis_server)
    miss, want = graph.run(first)
    assert (miss, graph.run(first)[0], first.counters.compiles) == ("miss", "l1", 1)
    second = redis_service(redis_server)
    hit, got = graph.run(second)
    assert (hit, second.counters.compiles) == ("l2", 0)
    np.testing.assert_array_equal(got[0], want[0])  # the loaded executable is the same native code
    l2 = tier(second, "l2")
    assert (l2.hits, l2.misses, l2.rejected, l2.errors) == (1, 0, 0, 0) and l2.compile_ms_saved > 0
    assert (tier(first, "l2").misses, tier(first, "l2").entries) == (1, 1)
    stored = f"xlacs:entry:{secret_id(SECRET.encode())}.{first.tiers.l1.values()[0].key}"
    assert tier(first, "l2").bytes == len(redis_server.client().get(stored))


def test_the_directory_tier_serves_a_restarted_service(tmp_path):
    graph = dense_graph()
    miss, want = graph.run(CompilationService(settings(cache_dir=str(tmp_path))))
    restarted = CompilationService(settings(cache_dir=str(tmp_path)))
    hit, got = graph.run(restarted)
    assert (miss, hit, restarted.counters.compiles) == ("miss", "disk", 0)
    np.testing.assert_array_equal(got[0], want[0])
    secret = generated_secret_path()  # outside the directory, the owner's only
    assert not secret.is_relative_to(tmp_path) and secret.stat().st_mode & 0o077 == 0
    disk = tier(restarted, "disk")
    assert (disk.entries, disk.hits) == (1, 1) and disk.bytes == sum(p.stat().st_size for p in tmp_path.glob("*.xce"))


def test_the_directory_evicts_least_recently_used_entries(tmp_path):
    graphs = [dense_graph(rows) for rows in (1, 2, 3)]
    service = CompilationService(settings(cache_dir=str(tmp_path)))
    graphs[0].run(service)
    size = tier(service, "disk").bytes
    small = CompilationService(settings(cache_dir=str(tmp_path), cache_dir_max_bytes=int(2.5 * size)))
    for g in graphs[1:]:
        g.run(small)
    disk = tier(small, "disk")
    assert (disk.entries, disk.evictions) == (2, 1)
    assert [g.run(CompilationService(settings(cache_dir=str(tmp_path))))[0] for g in graphs] == ["miss", "disk", "disk"]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "foreign_version", "bad_mac"])
def test_refused_entries_are_misses_counted_apart_and_overwritten_by_the_recompile(redis_server, damage, caplog):
    graph = dense_graph()
    name = entry_key(graph, CompilationService(settings()))
    r = redis_server.client()
    if damage == "garbage":
        r.set(name, b"\x80\x04\x95 not an entry, and never unpickled")
    else:
        redis_service(redis_server).compile(graph.spec())
        blob = r.get(name)
        r.set(name, {"truncated": blob[:len(blob) // 2],
                     "foreign_version": blob[:8] + (999).to_bytes(4, "big") + blob[12:],
                     "bad_mac": encode(decode(blob, name.split(".", 1)[1], SECRET.encode()),
                                       b"the secret of another deployment")}[damage])
    service = redis_service(redis_server)
    with caplog.at_level(logging.WARNING, "xlacs_server.cache.tiers"):
        assert graph.run(service)[0] == "miss"
    l2 = tier(service, "l2")
    assert (l2.rejected, l2.misses, l2.hits, service.counters.compiles) == (1, 1, 0, 1)
    assert "refused the entry" in caplog.text
    assert graph.run(redis_service(redis_server))[0] == "l2"  # the recompile replaced it


@pytest.mark.parametrize("damage", ["directory", "fifo", "truncated", "altered"])
def test_unreadable_directory_entries_are_misses_logged_once_and_replaced_by_the_recompile(tmp_path, damage, caplog):
    graph = dense_graph()
    graph.run(CompilationService(settings(cache_dir=str(tmp_path))))
    (path,) = tmp_path.glob("*.xce")
    blob = path.read_bytes()
    path.unlink()
    if damage == "directory":
        (path / "inside").mkdir(parents=True)
    elif damage == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(blob[:len(blob) // 2] if damage == "truncated" else blob[:-1] + bytes([blob[-1] ^ 1]))
    service = CompilationService(settings(cache_dir=str(tmp_path)))
    with caplog.at_level(logging.WARNING):
        assert graph.run(service)[0] == "miss"
    disk = tier(service, "disk")
    assert (disk.rejected, disk.misses, disk.errors, service.counters.compiles) == (1, 1, 0, 1)
    assert [(r.levelno, str(path) in r.getMessage()) for r in caplog.records] == [(logging.WARNING, True)]
    assert path.is_file() and graph.run(CompilationService(settings(cache_dir=str(tmp_path))))[0] == "disk"


def test_redis_without_a_secret_or_with_a_short_one_does_not_start(redis_server, tmp_path):
    with pytest.raises(CacheConfigError, match="XLACS_CACHE_SECRET"):
        CompilationService(settings(redis_url=redis_server.url, cache_secret=""))
    with pytest.raises(CacheConfigError, match="at least 16"):
        CompilationService(settings(redis_url=redis_server.url, cache_secret="short"))
    (tmp_path / "secret").write_text(SECRET + "\n")
    from_file = CompilationService(settings(redis_url=redis_server.url, cache_secret="",
                                            cache_secret_file=str(tmp_path / "secret")))
    graph = dense_graph()
    graph.run(redis_service(redis_server))
    assert graph.run(from_file)[0] == "l2"  # the same secret, read from a file


def test_ttl_key_prefix_and_entry_size_limit(redis_server):
    graph = dense_graph()
    service = redis_service(redis_server, cache_key_prefix="team-a:", cache_ttl_s=3600)
    graph.run(service)
    r = redis_server.client()
    (name,) = r.keys("*")
    assert name.startswith(f"team-a:entry:{secret_id(SECRET.encode())}.".encode()) and 3500 < r.ttl(name) <= 3600
    assert graph.run(redis_service(redis_server))[0] == "miss"  # another prefix is another namespace
    bigger = dense_graph(rows=5)  # another program: the graph's name is not in the key
    limited = redis_service(redis_server, cache_max_entry_bytes=100)
    assert bigger.run(limited)[0] == "miss"
    assert bigger.run(redis_service(redis_server))[0] == "miss"  # too big: it stayed in L1


def test_redis_down_at_start_serves_from_l1_and_counts_the_failure(caplog):
    graph = dense_graph()
    with caplog.at_level(logging.WARNING, "xlacs_server.cache.redis_store"):
        service = CompilationService(settings(redis_url=f"redis://127.0.0.1:{free_port()}/0"))
        assert [graph.run(service)[0] for _ in range(2)] == ["miss", "l1"]
    assert tier(service, "l2").errors >= 1 and "failed" in caplog.text


def test_redis_killed_and_restarted_mid_traffic_fails_no_request_then_reconnects(redis_server, caplog):
    before, during, after = dense_graph(1), dense_graph(2), dense_graph(3)
    service = redis_service(redis_server)
    assert before.run(service)[0] == "miss"
    redis_server.kill()
    with caplog.at_level(logging.INFO, "xlacs_server.cache.redis_store"):
        assert [during.run(service)[0], before.run(service)[0]] == ["miss", "l1"]
        assert tier(service, "l2").errors >= 1
        redis_server.start()  # empty, as a Redis without persistence comes back
        time.sleep(BACKOFF_MAX_S)  # the longest the store leaves a failed Redis alone
        assert after.run(service)[0] == "miss"
    assert "answers again" in caplog.text
    assert after.run(redis_service(redis_server))[0] == "l2"  # saved to the Redis that came back


def test_concurrent_compiles_in_one_process_compile_once(redis_server):
    graph = dense_graph()
    service = redis_service(redis_server)
    results = []
    threads = [threading.Thread(target=lambda: results.append(service.compile(graph.spec()).cache))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["l1"] * 7 + ["miss"] and service.counters.compiles == 1
    assert not service.compile_path._flights  # the per-key locks are dropped after the flight


def test_a_lease_left_by_a_crashed_replica_expires(redis_server):
    graph = dense_graph()
    name = entry_key(graph, CompilationService(settings()))
    redis_server.client().set(name.replace(":entry:", ":lease:"), "crashed-replica", px=1500)
    service = redis_service(redis_server, cache_lease_s=1.5)
    start = time.monotonic()
    assert graph.run(service)[0] == "miss"
    assert time.monotonic() - start >= 1.0  # it waited for the lease, then compiled
    assert service.counters.compiles == 1


def test_a_call_waiting_for_another_replicas_compile_stops_when_its_client_goes(redis_server):
    graph = dense_graph()
    name = entry_key(graph, CompilationService(settings()))
    redis_server.client().set(name.replace(":entry:", ":lease:"), "a-busy-replica", px=60_000)
    waits = []

    def checkpoint(stage: str) -> None:
        if stage.startswith("the end of another replica's compile"):
            waits.append(stage)
            if len(waits) == 3:
                raise Cancelled("the client went away")
    service = redis_service(redis_server)
    with pytest.raises(Cancelled):
        service.compile(graph.spec(), checkpoint)
    assert service.counters.compiles == 0 and len(waits) == 3


def test_a_loaded_executable_takes_unused_feeds_as_a_fresh_one_does(tmp_path):
    """jax.jit drops unused arguments unless told not to; a loaded executable has no jit to re-drop them."""
    frozen = freeze(tf.function(lambda x, unused: x * 2.0), tf.TensorSpec((3,), tf.float32),
                    tf.TensorSpec((2,), tf.float32))
    graph = Graph(frozen, "unused_feed")
    assert len(frozen.feeds) == 2
    fresh = graph.run(CompilationService(settings(cache_dir=str(tmp_path))))
    loaded = graph.run(CompilationService(settings(cache_dir=str(tmp_path))))
    assert (fresh[0], loaded[0]) == ("miss", "disk")
    np.testing.assert_array_equal(loaded[1][0], fresh[1][0])
