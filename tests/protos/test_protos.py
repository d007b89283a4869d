"""The generated stubs are fresh, and our GraphDef subset is wire-compatible with TensorFlow's."""
import filecmp
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from xlacs.v1 import tf_graph_pb2

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("package, committed", [("xlacs/v1", ROOT / "client" / "xlacs" / "v1"),
                                                 ("xlacs_server/inference/v2",
                                                  ROOT / "server" / "xlacs_server" / "inference" / "v2"),
                                                 ("xlacs_server/models/v2",
                                                  ROOT / "server" / "xlacs_server" / "models" / "v2"),
                                                 ("xlacs_server/models/tfs",
                                                  ROOT / "server" / "xlacs_server" / "models" / "tfs"),
                                                 ("xlacs_server/tfserving/apis",
                                                  ROOT / "server" / "xlacs_server" / "tfserving" / "apis")])
def test_generated_stubs_are_fresh(tmp_path, package, committed):
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_protos.py"), str(tmp_path)], check=True)
    generated = tmp_path / package
    names = sorted(p.name for p in generated.iterdir())
    assert names == sorted(p.name for p in committed.iterdir() if p.is_file())
    stale = [n for n in names if not filecmp.cmp(generated / n, committed / n, shallow=False)]
    assert not stale, f"run scripts/gen_protos.py: {stale} are stale"


def tf_graph_with_everything() -> tf.compat.v1.GraphDef:
    @tf.function
    def fn(x):
        def body(i, acc):
            return i + 1, acc * 2.0 + tf.constant([[1.5, -2.0]], dtype=tf.float32)
        _, y = tf.while_loop(lambda i, _: i < 3, body, [0, x])
        return tf.cast(y, tf.bfloat16), tf.constant(["a", "bc"]), tf.constant(np.float16(0.5))
    return fn.get_concrete_function(tf.TensorSpec([1, 2], tf.float32)).graph.as_graph_def()


def test_tf_graph_def_parses_in_ours_and_back():
    theirs = tf_graph_with_everything()
    assert len(theirs.library.function) > 0
    data = theirs.SerializeToString(deterministic=True)
    ours = tf_graph_pb2.GraphDef.FromString(data)
    assert {n.name for n in ours.node} == {n.name for n in theirs.node}
    assert ours.SerializeToString(deterministic=True) == data
    again = tf.compat.v1.GraphDef.FromString(ours.SerializeToString())
    assert again == theirs


def test_our_graph_def_runs_in_tf():
    ours = tf_graph_pb2.GraphDef()
    const = ours.node.add(name="c", op="Const")
    const.attr["dtype"].type = tf_graph_pb2.DT_FLOAT
    const.attr["value"].tensor.dtype = tf_graph_pb2.DT_FLOAT
    const.attr["value"].tensor.tensor_shape.dim.add(size=2)
    const.attr["value"].tensor.float_val.extend([1.0, 2.0])
    neg = ours.node.add(name="n", op="Neg", input=["c"])
    neg.attr["T"].type = tf_graph_pb2.DT_FLOAT
    theirs = tf.compat.v1.GraphDef.FromString(ours.SerializeToString())
    run = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(theirs, name=""), [])
    np.testing.assert_array_equal(run.prune([], "n:0")().numpy(), [-1.0, -2.0])
