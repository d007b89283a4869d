"""The cache is a list of tiers (xlacs_server.cache.tiers.OPENERS): a tier added to the list serves Compiles and
reports its counters through GetStats and /metrics with no other edit, and the walk over several tiers fills
the faster ones and counts each tier once per Compile."""
import dataclasses

import numpy as np

from tests.cache.conftest import dense_graph, settings
from tests.conftest import RunningServer
from xlacs import Client
from xlacs_server import metrics
from xlacs_server.cache import memory, tiers
from xlacs_server.cache.entry import RejectedEntry
from xlacs_server.cache.stats import TierStats
from xlacs_server.cache.tier import Tier
from xlacs_server.service import CompilationService


class DictTier(Tier):
    """A tier over a dict that several services share, as replicas share a Redis. Like a tier behind L1, it
    hands out a fresh executable that carries the serialized form it was given; "garbage" is a refused entry."""

    def __init__(self, name: str, entries: dict):
        self.tier = name
        self.stats = TierStats(name)
        self.entries = entries

    def get(self, key, device):
        stored = self.entries.get(key)
        if stored == "garbage":
            raise RejectedEntry("malformed", "planted by the test")
        return None if stored is None else dataclasses.replace(stored[0], serialized=stored[1])

    def put(self, executable, serialized):
        self.entries[executable.key] = (executable, serialized)
        self.stats.entries = len(self.entries)


def stats(service: CompilationService) -> dict[str, tuple[int, int, int]]:
    """(hits, misses, rejected) by tier."""
    return {t.tier: (t.stats.hits, t.stats.misses, t.stats.rejected) for t in service.tiers}


def test_a_tier_added_to_the_list_serves_compiles_and_reports_its_stats(monkeypatch):
    shared = {}
    monkeypatch.setattr(tiers, "OPENERS", [*tiers.OPENERS, lambda settings: DictTier("dict", shared)])
    graph = dense_graph()
    first = CompilationService(settings())
    miss, want = graph.run(first)
    assert miss == "miss" and list(shared) == [first.tiers.l1.values()[0].key]  # written through
    assert stats(first) == {"l1": (0, 1, 0), "dict": (0, 1, 0)}
    server = RunningServer(settings())  # a fresh process's L1, the same dict behind it
    try:
        with Client(server.address, timeout=600) as client:
            executable = graph.compile(client)
            assert (executable.cache, graph.compile(client).cache) == ("dict", "l1")  # the hit filled L1
            np.testing.assert_array_equal(executable(*graph.inputs().values())[0], want[0])
            dict_stats = {t.tier: t for t in client.stats().tiers}["dict"]
            assert (dict_stats.hits, dict_stats.misses, client.stats().compiles) == (1, 0, 0)
            assert dict_stats.compile_ms_saved > 0
        scraped = metrics.registry_for(server.service)
        assert scraped.get_sample_value("xlacs_cache_requests_total", {"tier": "dict", "result": "hit"}) == 1
    finally:
        server.stop()


def test_the_walk_fills_faster_tiers_and_counts_each_tier_once(monkeypatch):
    near, far = {}, {}
    monkeypatch.setattr(tiers, "OPENERS", [memory.open_tier, lambda settings: DictTier("near", near),
                                           lambda settings: DictTier("far", far)])
    graph = dense_graph()
    compiled = CompilationService(settings())
    assert graph.run(compiled)[0] == "miss" and near.keys() == far.keys() != set()
    assert stats(compiled) == {"l1": (0, 1, 0), "near": (0, 1, 0), "far": (0, 1, 0)}

    near.clear()
    from_far = CompilationService(settings())
    assert graph.run(from_far)[0] == "far" and near.keys() == far.keys()  # near filled from far
    assert stats(from_far) == {"l1": (0, 1, 0), "near": (0, 1, 0), "far": (1, 0, 0)}

    from_near = CompilationService(settings())
    assert graph.run(from_near)[0] == "near"
    assert stats(from_near) == {"l1": (0, 1, 0), "near": (1, 0, 0), "far": (0, 0, 0)}  # far not looked in

    (key,) = near
    near[key] = "garbage"
    refused = CompilationService(settings())
    assert graph.run(refused)[0] == "far" and near[key] != "garbage"  # the refused entry is overwritten
    assert stats(refused) == {"l1": (0, 1, 0), "near": (0, 1, 1), "far": (1, 0, 0)}
    assert refused.counters.compiles == 0


def test_redis_and_a_directory_configured_together_use_redis(redis_server, tmp_path):
    """The directory is the tier without Redis: its default does not turn it on beside a Redis."""
    service = CompilationService(settings(redis_url=redis_server.url, cache_dir=str(tmp_path)))
    assert [t.tier for t in service.tiers] == ["l1", "l2"]
    assert dense_graph().run(service)[0] == "miss" and not list(tmp_path.glob("*.xce"))
