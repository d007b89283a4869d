"""Tiny requests cannot take huge memory: a constant of one value repeated (a shape and at most one value,
which TensorFlow fills in) stays one value broadcast, whether unused, used or fetched; values TF would fill in
otherwise count against max_fill_bytes; list attrs are bounded; a Const's dtype must match its value; a
tensor of a rank numpy cannot hold is UNIMPLEMENTED."""
import grpc
import numpy as np
import pytest

from xlacs import tensors
from xlacs.v1 import tf_graph_pb2 as tf, xlacs_pb2
from xlacs_server.daemon_process import DaemonProcess

N = 1 << 26


def splat(name: str, dtype: int, shape: list[int], **values) -> tf.NodeDef:
    """A Const of `shape` that carries at most one value (TF fills in the rest)."""
    tensor = tf.TensorProto(dtype=dtype, tensor_shape=tf.TensorShapeProto(dim=[
        tf.TensorShapeProto.Dim(size=d) for d in shape]), **values)
    node = tf.NodeDef(name=name, op="Const")
    node.attr["value"].tensor.CopyFrom(tensor)
    node.attr["dtype"].type = dtype
    return node


def with_identity(*nodes: tf.NodeDef, fetch_input: str = "x") -> bytes:
    """x (a [2] float32 placeholder), the given nodes, and y = Identity(fetch_input)."""
    x = tf.NodeDef(name="x", op="Placeholder")
    x.attr["dtype"].type = tf.DT_FLOAT
    x.attr["shape"].shape.dim.add(size=2)
    y = tf.NodeDef(name="y", op="Identity", input=[fetch_input])
    y.attr["T"].type = tf.DT_FLOAT
    return tf.GraphDef(node=[x, *nodes, y]).SerializeToString()


def compile_request(graph_def: bytes, fetch: str = "y:0") -> xlacs_pb2.CompileRequest:
    return xlacs_pb2.CompileRequest(graph_def=graph_def, fetches=[fetch],
                                    feeds=[xlacs_pb2.TensorSpec(name="x:0", dtype=tf.DT_FLOAT, shape=[2])])


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    daemon = DaemonProcess(tmp_path_factory.mktemp("tiny") / "serve.log", {"XLACS_CACHE_DIR": ""})
    yield daemon
    assert daemon.stop() == 0


def test_tiny_requests_declaring_huge_constants_leave_rss_within_the_budget(daemon):
    unused_strings = with_identity(splat("s", tf.DT_STRING, [N]))
    assert len(unused_strings) < 150  # the attack: a 124-byte request in the report
    used_zeros = tf.GraphDef.FromString(with_identity())
    used_zeros.node.extend([splat("zeros", tf.DT_DOUBLE, [N]), *_sum("total", "zeros", tf.DT_DOUBLE)])
    fetched = with_identity(splat("big", tf.DT_FLOAT, [N], float_val=[2.5]))
    with daemon.client(timeout=300) as client:
        client.stub.Compile(compile_request(with_identity()), timeout=300)  # warm: jax and the first compile
        before = daemon.rss_mib()
        assert client.stub.Compile(compile_request(unused_strings), timeout=300).executable_id
        for _ in range(4):
            total = client.stub.Compile(compile_request(used_zeros.SerializeToString(), "total:0"), timeout=300)
        (out,) = client.stub.Execute(xlacs_pb2.ExecuteRequest(executable_id=total.executable_id, inputs=[
            tensors.to_proto("x:0", np.zeros(2, np.float32))]), timeout=300).outputs
        assert tensors.from_proto(out) == 0.0
        big = client.stub.Compile(compile_request(fetched, "big:0"), timeout=300)
        assert list(big.signature.outputs[0].shape) == [N]
        assert daemon.rss_mib() - before < 256  # MiB: max_fill_bytes; unguarded, these took gigabytes


def _sum(name: str, input_name: str, dtype: int) -> list:
    axis = tf.NodeDef(name=f"{name}/axis", op="Const")
    axis.attr["value"].tensor.CopyFrom(tf.TensorProto(dtype=tf.DT_INT32, int_val=[0],
                                                      tensor_shape=tf.TensorShapeProto(dim=[
                                                          tf.TensorShapeProto.Dim(size=1)])))
    axis.attr["dtype"].type = tf.DT_INT32
    total = tf.NodeDef(name=name, op="Sum", input=[input_name, f"{name}/axis"])
    total.attr["T"].type = dtype
    total.attr["Tidx"].type = tf.DT_INT32
    return [axis, total]


@pytest.mark.parametrize("case,code,named", [
    ("fill", grpc.StatusCode.RESOURCE_EXHAUSTED, "max_fill_bytes"),
    ("list", grpc.StatusCode.RESOURCE_EXHAUSTED, "max_attr_list_length"),
    ("dtype", grpc.StatusCode.INVALID_ARGUMENT, "attr 'dtype' is float32, but its value is a tensor of float64"),
    ("rank", grpc.StatusCode.UNIMPLEMENTED, "rank 100"),
])
def test_refused_with_a_status_naming_the_node_and_the_limit(client, case, code, named):
    if case == "fill":  # two values, the last repeated: over 256 MiB of float32 to fill in
        node = splat("filled", tf.DT_FLOAT, [N + 1], float_val=[1.0, 2.0])
    elif case == "list":
        node = tf.NodeDef(name="listed", op="Const")
        node.attr["value"].tensor.CopyFrom(tf.TensorProto(dtype=tf.DT_FLOAT, float_val=[1.0]))
        node.attr["dtype"].type = tf.DT_FLOAT
        node.attr["_junk"].list.i.extend(range(1 << 17))
    elif case == "dtype":
        node = splat("mismatched", tf.DT_DOUBLE, [3], double_val=[1.0])
        node.attr["dtype"].type = tf.DT_FLOAT
    else:
        node = splat("deep", tf.DT_FLOAT, [1] * 100, float_val=[1.0])
    with pytest.raises(grpc.RpcError) as e:
        client.stub.Compile(compile_request(with_identity(node)), timeout=120)
    assert e.value.code() == code and named in e.value.details() and node.name in e.value.details()
