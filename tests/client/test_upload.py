"""Client.compile by digest against real daemons over gRPC (docs/cache.md, "Content-addressed graphs"): the
first compile uploads the graph as blobs, a new client compiling the same file sends none, a second checkpoint
sends only the tensor that changed and compiles nothing, a fresh replica sharing Redis needs nothing, and blobs a
daemon lost are uploaded again without the caller seeing it. TensorFlow is the oracle of every result."""
from __future__ import annotations

import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests.cache.conftest import SECRET, kept, prepared_records
from tests.oracle import assert_close
from xlacs import Client, digests, error_details, freeze, manifest
from xlacs.graph_source import GraphChanged
from xlacs.v1 import xlacs_pb2
from xlacs_server.config import Settings
from xlacs_server.rpc.server import create_server
from xlacs_server.daemon import Daemon

X = np.random.default_rng(3).uniform(-1, 1, (1, 16, 16, 3)).astype(np.float32)


def cnn() -> tf.keras.Model:
    """conv (1.7 KB kernel) -> BN -> conv (18 KB kernel, no bias) -> pool -> dense (1.3 KB kernel): three cuts."""
    tf.keras.utils.set_random_seed(0)
    return tf.keras.Sequential([
        tf.keras.Input((16, 16, 3)), tf.keras.layers.Conv2D(16, 3, padding="same"),
        tf.keras.layers.BatchNormalization(), tf.keras.layers.ReLU(),
        tf.keras.layers.Conv2D(32, 3, padding="same", use_bias=False, name="conv2"),
        tf.keras.layers.GlobalAveragePooling2D(), tf.keras.layers.Dense(10)])


def frozen_and_expected(model: tf.keras.Model):
    frozen = freeze(tf.function(lambda x: model(x, training=False)), tf.TensorSpec(X.shape, tf.float32))
    return frozen, model(X, training=False).numpy()


@pytest.fixture(scope="module")
def checkpoints():
    """The model frozen, then frozen again after retraining conv2's kernel: two checkpoints of one model."""
    model = cnn()
    first = frozen_and_expected(model)
    conv2 = model.get_layer("conv2")
    conv2.set_weights([np.random.default_rng(1).normal(0, 0.1, conv2.get_weights()[0].shape)])
    return [first, frozen_and_expected(model)]


class Replica:
    """An in-process daemon on a fixed loopback port, which can restart empty on the same port."""

    def __init__(self, **settings):
        self.settings = Settings(cache_dir="", **settings)
        self.port = 0
        self.start()

    def start(self) -> None:
        self.service = Daemon(self.settings)
        self.server, self.port, _ = create_server(self.service, f"127.0.0.1:{self.port}")
        self.server.start()
        self.address = f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop(grace=None)
        self.service.close()

    def restart(self) -> None:
        """As after a crash: no executables, no blobs, nothing of what clients compiled."""
        self.stop()
        self.start()

    def received(self, rpc: str) -> int:
        return self.service.counters.received_bytes[rpc]


@pytest.fixture
def daemons():
    started = []

    def start(**settings) -> Replica:
        started.append(Replica(**settings))
        return started[-1]
    yield start
    for daemon in started:
        daemon.stop()


def write(tmp_path, frozen, name="model.pb"):
    path = tmp_path / name
    path.write_bytes(frozen.graph_def)
    return path


def compile_and_run(client: Client, graph, frozen, expected):
    executable = client.compile(graph, frozen.feeds, frozen.fetches)
    assert_close(executable(X)[0], expected)
    return executable


def test_first_compile_uploads_the_graph_as_blobs_and_a_new_client_sends_none(daemons, checkpoints, tmp_path):
    (frozen, expected), _ = checkpoints
    daemon, path = daemons(), write(tmp_path, frozen)
    graph_manifest, _ = manifest.split(frozen.graph_def).manifest()
    with Client(daemon.address) as first:
        executable = compile_and_run(first, path, frozen, expected)
    assert executable.cache == "miss" and executable.digest == digests.digest(frozen.graph_def)
    assert (executable.upload.uploaded_blobs, executable.upload.uploaded_bytes) == (
        1 + len(graph_manifest.cuts), len(frozen.graph_def))
    assert executable.upload.skipped_bytes == 0
    assert daemon.received("UploadBlobs") >= len(frozen.graph_def)
    uploaded = daemon.received("UploadBlobs")
    with Client(daemon.address) as second:
        for graph in (path, path, frozen.graph_def, bytearray(frozen.graph_def)):
            again = compile_and_run(second, graph, frozen, expected)
            assert again.id == executable.id and again.cache == "l1"
            assert again.upload == type(again.upload)(skipped_blobs=1, skipped_bytes=len(frozen.graph_def))
    assert daemon.received("UploadBlobs") == uploaded and daemon.received("FindMissingBlobs") > 0


def test_a_graph_def_message_serialized_anew_sends_at_most_its_skeleton(daemons, checkpoints):
    (frozen, expected), _ = checkpoints
    daemon = daemons()
    graph_def = tf.compat.v1.GraphDef.FromString(frozen.graph_def)
    with Client(daemon.address) as client:
        compile_and_run(client, frozen.graph_def, frozen, expected)
        executable = compile_and_run(client, graph_def, frozen, expected)
    skeleton = manifest.split(frozen.graph_def).manifest()[0].skeleton.size_bytes
    assert executable.upload.uploaded_bytes <= skeleton + 16  # its attr maps may come out in another order


def test_a_second_checkpoint_uploads_only_the_changed_tensor_and_compiles_nothing(daemons, checkpoints, tmp_path):
    (first, first_expected), (second, second_expected) = checkpoints
    daemon = daemons()
    before, after = (manifest.split(f.graph_def).manifest()[0] for f in (first, second))
    changed = [c.blob for b, c in zip(before.cuts, after.cuts) if b.blob != c.blob]
    assert len(changed) == 1 and changed[0].size_bytes == 3 * 3 * 16 * 32 * 4  # conv2's kernel
    # TensorFlow writes a node's attrs in no fixed order, so the skeleton of a new freeze may differ too.
    sent = changed + ([after.skeleton] if after.skeleton != before.skeleton else [])
    with Client(daemon.address) as client:
        compile_and_run(client, write(tmp_path, first, "first.pb"), first, first_expected)
        compiles = daemon.service.counters.compiles
        executable = compile_and_run(client, write(tmp_path, second, "second.pb"), second, second_expected)
    assert executable.cache != "miss" and daemon.service.counters.compiles == compiles
    assert (executable.upload.uploaded_blobs, executable.upload.uploaded_bytes) == (
        len(sent), sum(d.size_bytes for d in sent))
    assert executable.upload.skipped_bytes == len(second.graph_def) - executable.upload.uploaded_bytes


@pytest.fixture
def replicas(daemons, redis_server):
    return lambda: daemons(redis_url=redis_server.url, cache_secret=SECRET)


def test_a_fresh_replica_sharing_redis_needs_nothing_and_asks_again_for_what_redis_lost(replicas, redis_server,
                                                                                       checkpoints, tmp_path):
    (frozen, expected), _ = checkpoints
    path = write(tmp_path, frozen)
    with Client(replicas().address) as client:
        compile_and_run(client, path, frozen, expected)
    kept(redis_server)  # the prepared weights too, stored after the answer
    fresh = replicas()
    with Client(fresh.address) as client:
        executable = compile_and_run(client, path, frozen, expected)
    assert executable.cache == "l2" and executable.upload.uploaded_bytes == 0
    assert fresh.received("UploadBlobs") == 0 and fresh.received("Compile") < 1000
    # Redis evicts two of the weight blobs and the prepared weights (allkeys-lru may): the next fresh replica runs
    # the prepare program on every weight, and asks for those two only.
    graph_manifest, _ = manifest.split(frozen.graph_def).manifest()
    lost = graph_manifest.cuts[:2]
    r = redis_server.client()
    for cut in lost:
        keys = r.keys(f"*{cut.blob.hash}*")
        assert keys and r.delete(*keys) == len(keys)
    records = prepared_records(redis_server)
    assert r.delete(*records) == len(records)
    with Client(replicas().address) as client:
        executable = compile_and_run(client, path, frozen, expected)
    # Its first Compile loaded the program from Redis, then found the two blobs missing: the one after the upload
    # finds the program in L1.
    assert executable.cache == "l1"
    assert (executable.upload.uploaded_blobs, executable.upload.uploaded_bytes) == (
        2, sum(c.blob.size_bytes for c in lost))


@pytest.mark.parametrize("source", ["path", "bytes", "message"])
def test_an_executable_re_uploads_to_a_daemon_that_lost_everything(daemons, checkpoints, tmp_path, source):
    (frozen, expected), _ = checkpoints
    daemon = daemons()
    graph = {"path": write(tmp_path, frozen), "bytes": frozen.graph_def,
             "message": tf.compat.v1.GraphDef.FromString(frozen.graph_def)}[source]
    with Client(daemon.address) as client:
        executable = compile_and_run(client, graph, frozen, expected)
        daemon.restart()
        assert_close(executable(X)[0], expected)  # NOT_FOUND, compiled again by digest after an upload
        assert daemon.received("UploadBlobs") >= len(frozen.graph_def) - 64
        assert daemon.service.counters.compiles == 1


def test_a_graph_file_changed_since_its_compile_is_not_uploaded_under_the_old_digest(daemons, checkpoints,
                                                                                       tmp_path):
    (first, first_expected), (second, _) = checkpoints
    daemon, path = daemons(), write(tmp_path, first)
    with Client(daemon.address) as client:
        executable = compile_and_run(client, path, first, first_expected)
        path.write_bytes(second.graph_def)
        daemon.restart()
        with pytest.raises(GraphChanged, match=f"the file {path} changed since it was compiled"):
            executable(X)


def test_a_daemon_that_cannot_hold_the_graphs_blobs_gets_it_whole(daemons, checkpoints):
    """Its blob memory holds half the graph, and it has no other tier: the blobs uploaded first are evicted by
    the last ones. Asked for a blob it was just sent, the client sends the graph whole, once."""
    (frozen, expected), _ = checkpoints
    daemon = daemons(blob_memory_bytes=len(frozen.graph_def) // 2)
    with Client(daemon.address) as client:
        executable = compile_and_run(client, frozen.graph_def, frozen, expected)
    assert executable.upload.sent_whole and executable.cache == "miss"
    assert executable.upload.uploaded_bytes == 2 * len(frozen.graph_def)  # the blobs once, then the graph
    assert daemon.received("UploadBlobs") < 1.1 * len(frozen.graph_def)


def test_bytes_that_are_not_a_graph_def_get_the_daemons_invalid_argument(daemons):
    with Client(daemons().address) as client, pytest.raises(grpc.RpcError) as e:
        client.compile(b"\x0a\xff\xff\xff\x0f not a GraphDef", {"x:0": ("float32", [2])}, ["y:0"])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "GraphDef" in e.value.details()


def test_missing_blobs_are_in_the_error_details(daemons):
    """The NOT_FOUND detail the client acts on, as xlacs.error_details decodes it."""
    digest = digests.digest(b"a graph no daemon has seen")
    with Client(daemons().address) as client, pytest.raises(grpc.RpcError) as e:
        client.stub.Compile(xlacs_pb2.CompileRequest(graph_digest=digest, fetches=["y:0"]))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert [digests.key(d) for d in error_details(e.value).missing_blobs] == [digests.key(digest)]
