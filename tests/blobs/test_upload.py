"""FindMissingBlobs and UploadBlobs over real gRPC: only what the daemon lacks is listed, every blob is checked
against its digest before it is stored, and a faulty one is refused naming the blob and what is wrong."""
import hashlib

import grpc
import pytest

from tests.blobs.conftest import failure, tiers, two_layers, upload
from xlacs.v1 import xlacs_pb2


@pytest.fixture(scope="module")
def graph():
    return two_layers(seed=1)


def missing(stub, digests) -> set:
    response = stub.FindMissingBlobs(xlacs_pb2.FindMissingBlobsRequest(digests=digests))
    return {(d.hash, d.size_bytes) for d in response.missing}


def test_only_missing_blobs_are_listed_and_what_the_daemon_had_counts_as_saved(replica, graph):
    _, stub = replica()
    assert missing(stub, graph.digests()) == set(graph.blobs)
    stored = upload(stub, graph.blobs)
    assert (stored.blobs, stored.bytes) == (len(graph.blobs), sum(s for _, s in graph.blobs))
    assert missing(stub, graph.digests()) == set()
    stats = stub.GetStats(xlacs_pb2.GetStatsRequest())
    assert stats.upload_saved_bytes == stored.bytes
    assert stats.received_bytes["UploadBlobs"] > stored.bytes  # the blobs plus their chunks' digests
    assert (tiers(stats)["l1"].entries, tiers(stats)["l2"].entries) == (len(graph.blobs), len(graph.blobs))
    _, fresh = replica()  # a replica sharing the Redis has them too
    assert missing(fresh, graph.digests()) == set()


def _chunk(blob, offset, data, size=None):
    (h, s), _ = blob
    return xlacs_pb2.BlobChunk(digest=xlacs_pb2.Digest(hash=h, size_bytes=s if size is None else size),
                               offset=offset, data=data)


@pytest.mark.parametrize("case", ["wrong content", "past its size", "ends early", "offset gap", "offset not 0",
                                  "another blob midway"])
def test_a_faulty_blob_is_refused_naming_it_and_is_not_stored(replica, graph, case):
    _, stub = replica()
    blob = next(iter(graph.blobs.items()))
    (h, size), data = blob
    other = hashlib.sha256(b"other").hexdigest()
    chunks, expected = {
        "wrong content": ([_chunk(blob, 0, data[:-1] + bytes([data[-1] ^ 1]))],
                          f"blob {h} ({size} bytes): its content hashes to "
                          f"{hashlib.sha256(data[:-1] + bytes([data[-1] ^ 1])).hexdigest()}"),
        "past its size": ([_chunk(blob, 0, data + b"x")], f"ends at {size + 1}, past its size_bytes {size}"),
        "ends early": ([_chunk(blob, 0, data[:100])], f"blob {h}: the stream ended at 100 of its {size} bytes"),
        "offset gap": ([_chunk(blob, 0, data[:100]), _chunk(blob, 200, data[200:])],
                       f"blob {h}: chunk at offset 200, expected 100"),
        "offset not 0": ([_chunk(blob, 100, data[100:])], f"blob {h}: chunk at offset 100, expected 0"),
        "another blob midway": ([_chunk(blob, 0, data[:100]), xlacs_pb2.BlobChunk(
            digest=xlacs_pb2.Digest(hash=other, size_bytes=5), offset=0, data=b"other")],
            f"blob {h}: the stream went on to blob {other} at 100 of its {size} bytes"),
    }[case]
    code, message, _ = failure(lambda: stub.UploadBlobs(iter(chunks)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and expected in message, message
    assert missing(stub, graph.digests()) == set(graph.blobs)
    stats = stub.GetStats(xlacs_pb2.GetStatsRequest())
    assert [t.entries for t in stats.blob_tiers] == [0, 0]


def test_blobs_complete_before_a_faulty_one_stay_and_a_bad_digest_is_named(replica, graph):
    _, stub = replica()
    (first, data), (second, _) = list(graph.blobs.items())[:2]
    good = xlacs_pb2.BlobChunk(digest=xlacs_pb2.Digest(hash=first[0], size_bytes=first[1]), offset=0, data=data)
    bad = xlacs_pb2.BlobChunk(digest=xlacs_pb2.Digest(hash=second[0], size_bytes=second[1]), offset=0, data=data)
    code, message, _ = failure(lambda: stub.UploadBlobs(iter([good, bad])))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and f"blob {second[0]}" in message
    assert missing(stub, graph.digests()) == set(graph.blobs) - {first}
    code, message, _ = failure(lambda: stub.FindMissingBlobs(xlacs_pb2.FindMissingBlobsRequest(
        digests=[xlacs_pb2.Digest(hash="ABC", size_bytes=3)])))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "digests[0]: hash 'ABC' is not a sha256" in message


def test_a_blob_over_max_graph_bytes_is_refused_at_its_first_chunk(replica):
    _, stub = replica(max_graph_bytes=1000)
    data = b"y" * 1001
    chunk = xlacs_pb2.BlobChunk(digest=xlacs_pb2.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=1001),
                                offset=0, data=data[:10])
    code, message, _ = failure(lambda: stub.UploadBlobs(iter([chunk])))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_graph_bytes=1000" in message, message


def test_find_missing_blobs_asks_about_at_most_max_graph_nodes_digests(replica, graph):
    _, stub = replica(max_graph_nodes=2)
    code, message, _ = failure(lambda: stub.FindMissingBlobs(xlacs_pb2.FindMissingBlobsRequest(
        digests=graph.digests())))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "asks about 3 digests" in message, message
    assert "max_graph_nodes=2" in message
