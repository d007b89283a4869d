"""Binding records over real gRPC (docs/cache.md, "Binding records"): a fresh replica sharing Redis binds a
Compile by digest from the record another replica kept, without resolving or parsing the graph; a record that
does not check, or whose weights are gone, is a miss and the graph is resolved as before."""
import grpc
import pytest

from tests.blobs.conftest import execute, failure, tiers, two_layers, upload
from tests.oracle import assert_close
from xlacs.v1 import xlacs_pb2


@pytest.fixture(scope="module")
def graph():
    return two_layers(seed=11)


def records(redis_server) -> list[bytes]:
    return sorted(redis_server.client().keys("xlacs:binding.*"))


def test_a_fresh_replica_binds_from_the_record_without_parsing_the_graph(replica, redis_server, graph):
    _, first = replica()
    upload(first, graph.blobs)
    compiled = first.Compile(graph.request(with_manifest=True))
    assert "record" in compiled.stage_ms and len(records(redis_server)) == 1
    _, fresh = replica()
    bound = fresh.Compile(graph.request())
    assert (bound.cache, bound.executable_id) == ("l2", compiled.executable_id)
    assert "record" in bound.stage_ms and not {"parse", "key", "compile"} & set(bound.stage_ms), bound.stage_ms
    assert_close(execute(fresh, bound.executable_id), graph.want)
    stats = fresh.GetStats(xlacs_pb2.GetStatsRequest())
    assert stats.compiles == 0
    assert (tiers(stats)["l2"].hits, tiers(stats)["l2"].rejected) == (1 + len(graph.manifest.cuts), 0)
    assert set(fresh.Compile(graph.request()).stage_ms) == {"resolve"}  # then from the in-process map


@pytest.mark.parametrize("case", ["altered", "another graph's"])
def test_a_record_that_does_not_check_is_a_rejected_miss_and_the_graph_is_resolved(replica, redis_server, graph,
                                                                                    case):
    _, first = replica()
    other = two_layers(seed=12)  # another checkpoint: its record names the same program and other weights
    upload(first, {**graph.blobs, **other.blobs})
    first.Compile(graph.request(with_manifest=True))
    [name] = records(redis_server)
    client = redis_server.client()
    if case == "altered":
        record = client.get(name)
        client.set(name, record[:-40] + bytes([record[-40] ^ 1]) + record[-39:])
    else:
        first.Compile(other.request(with_manifest=True))
        [theirs] = set(records(redis_server)) - {name}
        client.set(name, client.get(theirs))
    _, fresh = replica()
    bound = fresh.Compile(graph.request())
    assert {"resolve", "parse"} <= set(bound.stage_ms) and bound.cache == "l2"
    assert_close(execute(fresh, bound.executable_id), graph.want)
    assert tiers(fresh.GetStats(xlacs_pb2.GetStatsRequest()))["l2"].rejected == 1
    _, third = replica()  # the record kept again by the fresh replica's bind
    assert "parse" not in third.Compile(graph.request()).stage_ms


def test_a_record_whose_weight_blob_is_gone_falls_back_to_the_graph(replica, redis_server, graph):
    _, first = replica()
    upload(first, graph.blobs)
    first.Compile(graph.request(with_manifest=True))
    cut = graph.manifest.cuts[0].blob
    redis_server.client().delete(f"xlacs:blob.{cut.hash}-{cut.size_bytes}:0")
    _, fresh = replica()
    # The record is passed over, and putting the graph together names the blob it lacks
    code, _, missing = failure(lambda: fresh.Compile(graph.request()))
    assert code == grpc.StatusCode.NOT_FOUND and missing == [(cut.hash, cut.size_bytes)]
    upload(fresh, {(cut.hash, cut.size_bytes): graph.blobs[(cut.hash, cut.size_bytes)]})
    bound = fresh.Compile(graph.request())
    assert "record" in bound.stage_ms and "parse" not in bound.stage_ms  # the record holds again
    assert_close(execute(fresh, bound.executable_id), graph.want)


def test_a_second_checkpoint_gets_its_own_record(replica, redis_server, graph):
    _, first = replica()
    second = two_layers(seed=13)
    upload(first, {**graph.blobs, **second.blobs})
    ids = [first.Compile(g.request(with_manifest=True)).executable_id for g in (graph, second)]
    assert len(records(redis_server)) == 2 and ids[0].split(".")[0] == ids[1].split(".")[0] and ids[0] != ids[1]
    _, fresh = replica()
    for g, executable_id in zip((graph, second), ids):
        bound = fresh.Compile(g.request())
        assert bound.executable_id == executable_id and "parse" not in bound.stage_ms
        assert_close(execute(fresh, bound.executable_id), g.want)
    assert fresh.GetStats(xlacs_pb2.GetStatsRequest()).compiles == 0
