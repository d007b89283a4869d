"""A failed call's machine-readable details reach the user: xlacs.error_details in Python, the JSON of the CLI."""
import json

import grpc
import pytest
import tensorflow as tf

from tests.client.test_cli import xlacs
from tests.rpc.test_errors import graph_def
from xlacs import error_details


def matmul_graph() -> bytes:
    """a @ b with shapes left to the feeds: feeding [2, 3] and [4, 5] makes a MatMul TF's kernel refuses."""
    def build():
        a = tf.compat.v1.placeholder(tf.float32, [None, None], name="a")
        b = tf.compat.v1.placeholder(tf.float32, [None, None], name="b")
        tf.matmul(a, b, name="product")
    return graph_def(build)


MISMATCHED = {"a:0": ("float32", [2, 3]), "b:0": ("float32", [4, 5])}


def test_a_graph_fault_names_node_op_and_input_in_the_details(client):
    with pytest.raises(grpc.RpcError) as e:
        client.compile(matmul_graph(), MISMATCHED, ["product:0"])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "'product'" in e.value.details() and "MatMul" in e.value.details()
    details = error_details(e.value)
    assert details.reason == "INVALID_NODE"
    assert details.metadata == {"node": "product", "op": "MatMul", "input": "b"}
    assert details.field_violations[0][0] == "graph_def.node[product].input[b]"
    assert len(details.request_id) == 16


def test_a_limit_names_its_setting_in_the_details(client):
    with pytest.raises(grpc.RpcError) as e:
        client.compile(matmul_graph(), {"a:0": ("float32", [10 ** 7, 10 ** 7]), "b:0": ("float32", [1, 1])},
                       ["product:0"])
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    details = error_details(e.value)
    assert details.reason == "LIMIT_EXCEEDED" and details.metadata["setting"] == "max_tensor_elements"


def test_cli_json_error_carries_the_reason_and_the_node(server, tmp_path):
    path = tmp_path / "matmul.pb"
    path.write_bytes(matmul_graph())
    result = xlacs("compile", str(path), "--feed", "a:0=float32[2,3]", "--feed", "b:0=float32[4,5]", "--fetch",
                   "product:0", server=server, check=False)
    assert result.returncode == 2, result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "INVALID_ARGUMENT" and error["reason"] == "INVALID_NODE"
    assert (error["node"], error["op"], error["input"]) == ("product", "MatMul", "b")
    assert len(error["request_id"]) == 16
