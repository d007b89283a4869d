"""A GraphDef over 1 GB compiles in one Compile message (limits raised to 1.5 GiB; docs/security.md).

The daemon is a subprocess of its own, so that its gigabytes are gone when the test ends."""
import numpy as np

from tests.graphs import GraphBuilder
from xlacs.v1 import tf_graph_pb2 as tf
from xlacs_server.daemon_process import DaemonProcess

ELEMENTS = (1 << 30) // 4 + (16 << 20)  # 1.06 GB of float32 weights


def big_graph_bytes() -> bytes:
    b = GraphBuilder()
    b.placeholder("x", shape=(4,))
    weights = b.graph_def.node.add(name="w", op="Const")
    weights.attr["dtype"].type = tf.DT_FLOAT
    value = weights.attr["value"].tensor
    value.dtype = tf.DT_FLOAT
    value.tensor_shape.dim.add(size=ELEMENTS)
    value.tensor_content = np.full(ELEMENTS, 0.5, np.float32).tobytes()
    b.const("axis", np.int32(0))
    b.op("total", "Sum", "w", "axis", Tidx=np.dtype(np.int32), keep_dims=False)
    b.op("y", "AddV2", "x", "total")
    return b.bytes()


def test_one_gigabyte_graph_compiles_and_runs(tmp_path):
    data = big_graph_bytes()
    assert len(data) > 1 << 30
    server = DaemonProcess(tmp_path / "serve.log", {"XLACS_CACHE_DIR": ""})
    try:
        with server.client() as client:
            executable = client.compile(data, {"x:0": ("float32", (4,))}, ["y:0"], name="big")
            del data
            got, = executable(np.arange(4, dtype=np.float32))
        np.testing.assert_allclose(got, np.arange(4) + ELEMENTS * 0.5, rtol=1e-5)
    finally:
        assert server.stop() == 0, server.log.read_text()
