"""The Python client: graphs as objects, bytes or paths; feeds with any dtype spelling; tf.function helper."""
import numpy as np
import tensorflow as tf

from tests.rpc.test_errors import add_graph
from xlacs.v1 import tf_graph_pb2


def test_graph_as_object_bytes_or_path(client, tmp_path):
    data = add_graph()
    path = tmp_path / "g.pb"
    path.write_bytes(data)
    graphs = [data, str(path), path, tf_graph_pb2.GraphDef.FromString(data), tf.compat.v1.GraphDef.FromString(data)]
    dtypes = ["float32", np.float32, tf.float32, np.dtype("float32"), "DT_FLOAT"]
    ids = {client.compile(g, {"x:0": (d, (2, 3))}, ["y:0"]).id for g, d in zip(graphs, dtypes)}
    assert len(ids) == 1


def test_execute_by_name_or_position(client):
    executable = client.compile(add_graph(), {"x:0": ("float32", (2, 3))}, ["y:0"])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(executable.execute({"x:0": x})[0], x + 1)
    np.testing.assert_array_equal(executable(x)[0], x + 1)
    assert executable.input_names == ["x:0"] and executable.output_names == ["y:0"]


def test_compile_function_freezes_with_tf(client):
    w = tf.Variable(np.arange(12, dtype=np.float32).reshape(3, 4))

    @tf.function
    def model(x):
        return tf.nn.relu(x @ w)

    executable = client.compile_function(model, tf.TensorSpec([2, 3], tf.float32))
    x = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)
    np.testing.assert_allclose(executable(x)[0], model(x).numpy(), rtol=1e-6)
    info = client.executable_info(executable.id)
    assert info.executable_id == executable.id and [list(s.shape) for s in info.signature.outputs] == [[2, 4]]
    assert {"parse", "passes", "lower", "compile"} <= set(info.stage_ms)
