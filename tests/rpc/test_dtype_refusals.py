"""Raw requests with strings and quantized dtypes (what a client other than ours may send): INVALID_ARGUMENT
naming the feed or input, and why."""
import grpc
import numpy as np
import pytest

from tests.rpc.test_errors import add_graph, code_and_details
from xlacs.v1 import tf_graph_pb2 as tf
from xlacs.v1 import xlacs_pb2

QUANTIZED = "quantized dtypes are not supported by xlacs; dequantize to float32 first (tf.quantization.dequantize)"


@pytest.mark.parametrize("dtype, why", [
    (tf.DT_QINT8, f"dtype qint8: {QUANTIZED}"), (tf.DT_QUINT8, f"dtype quint8: {QUANTIZED}"),
    (tf.DT_QINT32, f"dtype qint32: {QUANTIZED}"), (tf.DT_STRING, "dtype string: xlacs compiles numeric tensors only"),
], ids=["qint8", "quint8", "qint32", "string"])
def test_compile_with_a_string_or_quantized_feed(client, dtype, why):
    request = xlacs_pb2.CompileRequest(graph_def=add_graph(), fetches=["y:0"],
                                       feeds=[xlacs_pb2.TensorSpec(name="x:0", dtype=dtype, shape=[2, 3])])
    with pytest.raises(grpc.RpcError) as e:
        client.stub.Compile(request)
    assert code_and_details(e) == (grpc.StatusCode.INVALID_ARGUMENT, f"feed 'x:0' has {why}")


def test_execute_with_a_string_input(client):
    executable = client.compile(add_graph(), {"x:0": ("float32", (2, 3))}, ["y:0"])
    request = xlacs_pb2.ExecuteRequest(executable_id=executable.id, inputs=[xlacs_pb2.Tensor(
        name="x:0", dtype=tf.DT_STRING, shape=[2, 3], content=np.zeros(6, np.float32).tobytes())])
    with pytest.raises(grpc.RpcError) as e:
        client.stub.Execute(request)
    assert code_and_details(e) == (grpc.StatusCode.INVALID_ARGUMENT,
                                   "tensor 'x:0' has dtype string: xlacs compiles numeric tensors only")
