"""A GraphDef over 1 GB compiles in one Compile message (limits raised to 2 GiB - 1 on both ends)."""
import numpy as np

from tests.graphs import GraphBuilder
from xlacs.v1 import tf_graph_pb2 as tf


def test_one_gigabyte_graph_compiles_and_runs(client):
    b = GraphBuilder()
    b.placeholder("x", shape=(4,))
    elements = (1 << 30) // 4 + (16 << 20)  # 1.06 GB of float32 weights
    weights = b.graph_def.node.add(name="w", op="Const")
    weights.attr["dtype"].type = tf.DT_FLOAT
    value = weights.attr["value"].tensor
    value.dtype = tf.DT_FLOAT
    value.tensor_shape.dim.add(size=elements)
    value.tensor_content = np.full(elements, 0.5, np.float32).tobytes()
    b.const("axis", np.int32(0))
    b.op("total", "Sum", "w", "axis", Tidx=np.dtype(np.int32), keep_dims=False)
    b.op("y", "AddV2", "x", "total")
    data = b.bytes()
    assert len(data) > 1 << 30
    executable = client.compile(data, {"x:0": ("float32", (4,))}, ["y:0"], name="big")
    got, = executable(np.arange(4, dtype=np.float32))
    np.testing.assert_allclose(got, np.arange(4) + elements * 0.5, rtol=1e-5)
