"""Compile by digest over real gRPC (docs/cache.md, Blobs): the daemon puts the GraphDef together from its
tiers' blobs, compiles it as if its bytes had been sent (the same executable), answers a repeat from a map
without reading the graph, tells what it lacks with NOT_FOUND and MissingBlobs, and trusts nothing a shared
tier returns before it hashes it."""
import grpc
import pytest

from tests.blobs.conftest import execute, failure, tiers, two_layers, upload
from tests.oracle import assert_close
from xlacs.v1 import xlacs_pb2


@pytest.fixture(scope="module")
def graph():
    return two_layers(seed=2)


def test_compile_by_digest_is_the_executable_of_the_bytes_and_a_repeat_reads_nothing(replica, graph):
    _, stub = replica()
    upload(stub, graph.blobs)
    first = stub.Compile(graph.request(with_manifest=True))
    assert first.cache == "miss" and "resolve" in first.stage_ms
    assert_close(execute(stub, first.executable_id), graph.want)
    sent = stub.Compile(graph.request(graph_def=graph.graph_def))  # the bytes themselves: the same executable
    assert (sent.cache, sent.executable_id) == ("l1", first.executable_id)
    repeat = stub.Compile(graph.request())
    assert (repeat.cache, repeat.executable_id, set(repeat.stage_ms)) == ("l1", first.executable_id, {"resolve"})
    plain = stub.Compile(xlacs_pb2.CompileRequest(graph_def=graph.graph_def, feeds=graph.request().feeds,
                                                  fetches=graph.fetches))
    assert plain.executable_id == first.executable_id
    stats = stub.GetStats(xlacs_pb2.GetStatsRequest())
    assert stats.compiles == 1 and tiers(stats, "tiers")["l1"].hits == 3


def test_a_fresh_replica_sharing_redis_finds_blobs_and_manifest_and_compiles_nothing(replica, graph):
    _, first = replica()
    upload(first, graph.blobs)
    compiled = first.Compile(graph.request(with_manifest=True))
    _, fresh = replica()
    loaded = fresh.Compile(graph.request())
    assert (loaded.cache, loaded.executable_id) == ("l2", compiled.executable_id)
    assert_close(execute(fresh, loaded.executable_id), graph.want)
    stats = fresh.GetStats(xlacs_pb2.GetStatsRequest())
    assert stats.compiles == 0 and "UploadBlobs" not in stats.received_bytes
    assert stats.received_bytes["Compile"] < 1000  # names and digests only
    l2 = tiers(stats)["l2"]
    assert (l2.hits, l2.rejected) == (1 + len(graph.manifest.cuts), 0)  # the binding record, each weight's blob


def test_bytes_sent_with_their_digest_are_kept_for_compiles_by_digest(replica, graph):
    _, first = replica()
    sent = first.Compile(graph.request(graph_def=graph.graph_def, with_manifest=True))
    assert first.FindMissingBlobs(xlacs_pb2.FindMissingBlobsRequest(digests=graph.digests())).missing == []
    _, fresh = replica()
    assert fresh.Compile(graph.request()).executable_id == sent.executable_id
    wrong = two_layers(seed=3).digest
    request = graph.request(graph_def=graph.graph_def)
    request.graph_digest.CopyFrom(wrong)
    code, message, _ = failure(lambda: first.Compile(request))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and f"not graph_digest {wrong.hash}" in message, message


def test_what_the_daemon_lacks_is_not_found_with_the_digests_in_the_details(replica, graph):
    _, stub = replica()
    code, message, missing = failure(lambda: stub.Compile(graph.request()))
    assert code == grpc.StatusCode.NOT_FOUND and missing == [(graph.digest.hash, graph.digest.size_bytes)]
    assert "compile again with graph_manifest" in message
    skeleton = (graph.manifest.skeleton.hash, graph.manifest.skeleton.size_bytes)
    upload(stub, {skeleton: graph.blobs[skeleton]})
    code, message, missing = failure(lambda: stub.Compile(graph.request(with_manifest=True)))
    assert code == grpc.StatusCode.NOT_FOUND and set(missing) == set(graph.blobs) - {skeleton}
    assert "upload them with UploadBlobs" in message
    upload(stub, graph.blobs)
    assert_close(execute(stub, stub.Compile(graph.request(with_manifest=True)).executable_id), graph.want)


def test_evicted_blobs_are_not_found_then_uploaded_again(replica, graph):
    _, stub = replica(redis_url="", blob_memory_bytes=sum(len(b) for b in graph.blobs.values()) + 100)
    upload(stub, graph.blobs)
    upload(stub, two_layers(seed=4).blobs)  # pushes the first graph's blobs out of memory, the only tier
    code, _, missing = failure(lambda: stub.Compile(graph.request(with_manifest=True)))
    assert code == grpc.StatusCode.NOT_FOUND and missing and set(missing) <= set(graph.blobs)
    assert tiers(stub.GetStats(xlacs_pb2.GetStatsRequest()))["l1"].evictions > 0
    upload(stub, graph.blobs)
    assert_close(execute(stub, stub.Compile(graph.request(with_manifest=True)).executable_id), graph.want)


def test_a_second_checkpoint_uploads_only_its_new_tensors_and_compiles_nothing(replica, graph):
    _, stub = replica()
    upload(stub, graph.blobs)
    first = stub.Compile(graph.request(with_manifest=True))
    second = two_layers(seed=5)
    new = stub.FindMissingBlobs(xlacs_pb2.FindMissingBlobsRequest(digests=second.digests())).missing
    assert {(d.hash, d.size_bytes) for d in new} == set(second.blobs) - set(graph.blobs)
    weights = {(c.blob.hash, c.blob.size_bytes) for c in second.manifest.cuts}
    assert weights <= {(d.hash, d.size_bytes) for d in new} <= weights | {
        (second.manifest.skeleton.hash, second.manifest.skeleton.size_bytes)}  # TF may name its nodes anew
    upload(stub, {(d.hash, d.size_bytes): second.blobs[(d.hash, d.size_bytes)] for d in new})
    bound = stub.Compile(second.request(with_manifest=True))
    assert bound.cache == "l1" and bound.executable_id.split(".")[0] == first.executable_id.split(".")[0]
    assert bound.executable_id != first.executable_id and "compile" not in bound.stage_ms
    assert_close(execute(stub, bound.executable_id), second.want)
    assert stub.GetStats(xlacs_pb2.GetStatsRequest()).compiles == 1


@pytest.mark.parametrize("case", ["overlap", "past the graph", "sizes", "hash"])
def test_a_bad_manifest_is_invalid_argument_naming_the_cut(replica, graph, case):
    _, stub = replica()
    upload(stub, graph.blobs)
    request = graph.request(with_manifest=True)
    cuts, size = request.graph_manifest.cuts, graph.digest.size_bytes
    if case == "overlap":
        cuts[1].offset = cuts[0].offset + 1
        expected = f"graph_manifest.cuts[1] at offset {cuts[1].offset} overlaps the cut before it"
    elif case == "past the graph":
        cuts[1].offset = size - 10
        expected = f"graph_manifest.cuts[1] at offset {size - 10} with {cuts[1].blob.size_bytes} bytes ends at"
    elif case == "sizes":
        request.graph_manifest.skeleton.size_bytes += 1
        expected = f"not the graph's {size} bytes"
    else:
        other = two_layers(seed=3)  # a weight of the same size: the sizes add up, the bytes are another graph's
        upload(stub, other.blobs)
        cuts[0].blob.CopyFrom(other.manifest.cuts[0].blob)
        expected = "graph_manifest: the bytes it names hash to"
    code, message, _ = failure(lambda: stub.Compile(request))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and expected in message, message
    code, _, missing = failure(lambda: stub.Compile(graph.request()))  # nothing kept
    assert code == grpc.StatusCode.NOT_FOUND and missing == [(graph.digest.hash, graph.digest.size_bytes)]


@pytest.mark.parametrize("planted", [0, 1], ids=["skeleton", "weight"])
def test_a_planted_redis_blob_is_a_miss_and_uploading_it_again_repairs_it(replica, redis_server, graph, planted):
    _, first = replica()
    upload(first, graph.blobs)
    first.Compile(graph.request(with_manifest=True))
    (h, size), data = list(graph.blobs.items())[planted]
    redis_server.client().set(f"xlacs:blob.{h}-{size}:0", bytes([data[0] ^ 1]) + data[1:])
    redis_server.client().delete(*redis_server.client().keys("xlacs:binding.*"))  # the graph is then resolved
    _, fresh = replica()
    code, _, missing = failure(lambda: fresh.Compile(graph.request()))
    assert code == grpc.StatusCode.NOT_FOUND and missing == [(h, size)]
    assert tiers(fresh.GetStats(xlacs_pb2.GetStatsRequest()))["l2"].rejected == 1
    assert [(d.hash, d.size_bytes) for d in fresh.FindMissingBlobs(
        xlacs_pb2.FindMissingBlobsRequest(digests=graph.digests())).missing] == [(h, size)]  # deleted there
    upload(fresh, {(h, size): data})
    assert fresh.Compile(graph.request()).cache == "l2"


def test_a_planted_redis_manifest_is_a_miss_and_dropped(replica, redis_server, graph):
    _, first = replica()
    other = two_layers(seed=6)  # another graph of the same sizes: a well-formed manifest of the wrong bytes
    upload(first, {**graph.blobs, **other.blobs})
    first.Compile(graph.request(with_manifest=True))
    key = f"xlacs:manifest.{graph.digest.hash}-{graph.digest.size_bytes}"
    redis_server.client().set(key, other.manifest.SerializeToString())
    redis_server.client().delete(*redis_server.client().keys("xlacs:binding.*"))  # the graph is then resolved
    _, fresh = replica()
    code, _, missing = failure(lambda: fresh.Compile(graph.request()))
    assert code == grpc.StatusCode.NOT_FOUND and missing == [(graph.digest.hash, graph.digest.size_bytes)]
    assert tiers(fresh.GetStats(xlacs_pb2.GetStatsRequest()))["l2"].rejected == 1
    assert redis_server.client().exists(key) == 0
    assert fresh.Compile(graph.request(with_manifest=True)).cache == "l2"
    assert redis_server.client().exists(key) == 1


def test_without_redis_blobs_and_manifests_are_shared_through_the_directory(replica, graph, tmp_path):
    _, first = replica(redis_url="", cache_dir=str(tmp_path))
    upload(first, graph.blobs)
    compiled = first.Compile(graph.request(with_manifest=True))
    (h, size), data = list(graph.blobs.items())[0]
    assert (tmp_path / "blobs" / f"blob.{h}-{size}.xce").read_bytes() == data
    _, fresh = replica(redis_url="", cache_dir=str(tmp_path))
    loaded = fresh.Compile(graph.request())
    assert (loaded.cache, loaded.executable_id) == ("disk", compiled.executable_id)
    assert tiers(fresh.GetStats(xlacs_pb2.GetStatsRequest()))["disk"].hits == 1 + len(graph.manifest.cuts)
    assert_close(execute(fresh, loaded.executable_id), graph.want)


@pytest.mark.parametrize("setting", ["max_graph_bytes", "max_graph_nodes"])
def test_a_graph_over_the_limits_is_refused_before_anything_is_read(replica, graph, setting):
    limit = graph.digest.size_bytes - 1 if setting == "max_graph_bytes" else len(graph.manifest.cuts) - 1
    _, stub = replica(**{setting: limit})
    code, message, _ = failure(lambda: stub.Compile(graph.request(with_manifest=True)))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and f"{setting}={limit}" in message, message
    assert stub.GetStats(xlacs_pb2.GetStatsRequest()).blob_tiers[0].misses == 0


def test_a_planted_directory_blob_or_link_is_a_miss(replica, graph, tmp_path):
    _, first = replica(redis_url="", cache_dir=str(tmp_path))
    upload(first, graph.blobs)
    first.Compile(graph.request(with_manifest=True))
    (changed, data), (linked, _) = list(graph.blobs.items())[1:3]
    (tmp_path / "blobs" / f"blob.{changed[0]}-{changed[1]}.xce").write_bytes(data[::-1])
    link = tmp_path / "blobs" / f"blob.{linked[0]}-{linked[1]}.xce"
    link.unlink()
    link.symlink_to(tmp_path / "blobs" / f"blob.{changed[0]}-{changed[1]}.xce")
    _, fresh = replica(redis_url="", cache_dir=str(tmp_path))
    code, _, missing = failure(lambda: fresh.Compile(graph.request()))
    assert code == grpc.StatusCode.NOT_FOUND and set(missing) == {changed, linked}
    assert tiers(fresh.GetStats(xlacs_pb2.GetStatsRequest()))["disk"].rejected == 2
    assert not link.exists() and not link.is_symlink()


def test_a_directory_where_a_blob_file_goes_is_a_miss_and_removed(replica, graph, tmp_path):
    _, first = replica(redis_url="", cache_dir=str(tmp_path))
    upload(first, graph.blobs)
    first.Compile(graph.request(with_manifest=True))
    (taken, data) = list(graph.blobs.items())[1]
    path = tmp_path / "blobs" / f"blob.{taken[0]}-{taken[1]}.xce"
    path.unlink()
    (path / "inside").mkdir(parents=True)
    _, fresh = replica(redis_url="", cache_dir=str(tmp_path))
    code, _, missing = failure(lambda: fresh.Compile(graph.request()))
    assert code == grpc.StatusCode.NOT_FOUND and set(missing) == {taken}
    disk = tiers(fresh.GetStats(xlacs_pb2.GetStatsRequest()))["disk"]
    assert (disk.rejected, disk.errors) == (1, 0) and not path.exists()
    upload(fresh, {taken: data})
    # The failed Compile had loaded the executable (the record's path reads the weights it binds after it)
    assert fresh.Compile(graph.request()).cache == "l1" and path.read_bytes() == data


def test_a_repeat_whose_binding_was_evicted_binds_again_from_the_tiers(replica, graph):
    _, stub = replica(max_loaded=1)
    other = two_layers(seed=9, second=2.0)
    upload(stub, {**graph.blobs, **other.blobs})
    first = stub.Compile(graph.request(with_manifest=True))
    stub.Compile(other.request(with_manifest=True))  # the only binding now: the first one went
    again = stub.Compile(graph.request())
    assert (again.executable_id, again.cache) == (first.executable_id, "l1")
    assert {"resolve", "record", "bind"} <= set(again.stage_ms) and "parse" not in again.stage_ms  # its record
    assert_close(execute(stub, again.executable_id), graph.want)
    assert set(stub.Compile(graph.request()).stage_ms) == {"resolve"}
