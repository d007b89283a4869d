"""The split of a GraphDef into a skeleton and its weight tensors (xlacs.manifest), and the digests of files
(xlacs.digests), on real frozen TF graphs: put back together they are the graph's bytes, every cut is a
tensor_content (in nodes and in the function library), and bytes that are not a GraphDef are refused."""
import hashlib
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.models.keras_models import frozen_keras
from xlacs import digests, freeze, manifest
from xlacs.v1 import tf_graph_pb2


def loop_with_weights() -> bytes:
    """A functional While whose body adds a 2 KiB constant: a tensor_content in the function library."""
    bias = np.arange(512, dtype=np.float32)

    def fn(x):
        return tf.while_loop(lambda i, acc: i < 3, lambda i, acc: (i + 1, acc + tf.constant(bias)),
                             (tf.constant(0), x))[1]
    return freeze(fn, tf.TensorSpec([512], tf.float32), lower_control_flow=False).graph_def


@pytest.fixture(scope="module")
def graphs() -> dict[str, bytes]:
    return {"MobileNetV2": frozen_keras("MobileNetV2", (1, 96, 96, 3))[0].graph_def, "loop": loop_with_weights()}


def tensor_contents(data: bytes, min_bytes: int) -> list[bytes]:
    """Every tensor_content of at least `min_bytes` as protobuf parses them: the nodes', then the library's."""
    graph_def = tf_graph_pb2.GraphDef.FromString(data)
    nodes = [*graph_def.node, *(n for f in graph_def.library.function for n in f.node_def)]
    return [a.tensor.tensor_content for n in nodes for a in n.attr.values()
            if a.HasField("tensor") and len(a.tensor.tensor_content) >= min_bytes]


@pytest.mark.parametrize("name", ["MobileNetV2", "loop"])
@pytest.mark.parametrize("min_cut_bytes", [manifest.MIN_CUT_BYTES, 1])
def test_the_split_puts_back_together_and_cuts_tensor_contents(graphs, name, min_cut_bytes):
    data = graphs[name]
    split = manifest.split(data, min_cut_bytes)
    assert manifest.join(split.skeleton, split.cuts) == data
    cuts = [bytes(c) for _, c in split.cuts]
    assert sorted(cuts) == sorted(tensor_contents(data, min_cut_bytes)) and cuts
    offsets = [offset for offset, _ in split.cuts]
    assert offsets == sorted(offsets)
    assert all(data[offset:offset + len(cut)] == cut for offset, cut in zip(offsets, cuts))
    assert len(split.skeleton) == len(data) - sum(map(len, cuts))


def test_small_tensors_stay_in_the_skeleton(graphs):
    data = graphs["MobileNetV2"]
    every, large = manifest.split(data, 1), manifest.split(data)
    assert len(every.cuts) > len(large.cuts)
    assert all(len(c) >= manifest.MIN_CUT_BYTES for _, c in large.cuts)
    assert len(large.skeleton) - len(every.skeleton) == sum(len(c) for _, c in every.cuts if len(c) < 1024)


def test_the_manifest_names_each_blob_by_its_sha256(graphs):
    split = manifest.split(graphs["MobileNetV2"])
    graph_manifest, blobs = split.manifest()
    assert graph_manifest.skeleton.hash == hashlib.sha256(split.skeleton).hexdigest()
    assert [c.offset for c in graph_manifest.cuts] == [offset for offset, _ in split.cuts]
    for cut in graph_manifest.cuts:
        data = blobs[digests.key(cut.blob)]
        assert cut.blob.hash == hashlib.sha256(data).hexdigest() and cut.blob.size_bytes == len(data)
    assert len(blobs) == len({digests.key(c.blob) for c in graph_manifest.cuts} | {digests.key(graph_manifest.skeleton)})


def test_a_changed_weight_changes_only_its_cut(graphs):
    data = graphs["MobileNetV2"]
    offset, kernel = next((o, c) for o, c in manifest.split(data).cuts if len(c) >= 4096)
    changed = bytearray(data)
    changed[offset:offset + 4] = np.float32(123.0).tobytes()  # a checkpoint that changed one weight
    before, after = (manifest.split(d).manifest()[0] for d in (data, bytes(changed)))
    assert before.skeleton == after.skeleton
    assert [a.blob.size_bytes for b, a in zip(before.cuts, after.cuts) if b.blob != a.blob] == [len(kernel)]


@pytest.mark.parametrize("damage, why", [
    (lambda d: d[:len(d) // 2], "past the end|claims"),  # cut in the middle of a tensor or a node
    (lambda d: b"\xff\x00garbage" * 10, "wire type|claims|past the end"),
    (lambda d: d + b"\x0f", "wire type 7"),
    (lambda d: d + b"\x00", "field number 0"),
    (lambda d: d + b"\x08" + b"\xff" * 11, "varint longer than 10 bytes"),
])
def test_malformed_bytes_are_refused(graphs, damage, why):
    with pytest.raises(manifest.MalformedGraphDef, match=why) as e:
        manifest.split(damage(graphs["loop"]))
    assert isinstance(e.value, ValueError)


def test_join_refuses_overlapping_cuts():
    with pytest.raises(ValueError, match="overlaps"):
        manifest.join(b"abcdef", [(2, b"xy"), (3, b"z")])
    assert manifest.join(b"abcdef", [(0, b"x"), (3, b"yz"), (9, b"!")]) == b"xabyzcdef!"


def test_a_file_is_hashed_once_until_it_changes(tmp_path):
    path = tmp_path / "g.pb"
    path.write_bytes(b"first version")
    files = digests.FileDigests()
    with files.open(path) as (digest, data):
        assert bytes(data) == b"first version"
        assert digest.hash == hashlib.sha256(b"first version").hexdigest() and digest.size_bytes == 13
    stat = path.stat()
    path.write_bytes(b"other version")  # same size; the same mtime put back: the remembered digest answers
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with files.open(path) as (again, _):
        assert again == digest
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    with files.open(path) as (changed, _):
        assert changed.hash == hashlib.sha256(b"other version").hexdigest()


def test_an_empty_file_is_an_empty_graph(tmp_path):
    path = tmp_path / "empty.pb"
    path.write_bytes(b"")
    with digests.FileDigests().open(path) as (digest, data):
        assert digest.hash == hashlib.sha256(b"").hexdigest() and bytes(data) == b""
    assert manifest.split(b"").skeleton == b"" and manifest.split(b"").cuts == []
