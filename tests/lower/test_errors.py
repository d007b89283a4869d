"""Who is at fault decides the status of a failed lowering, over real gRPC: a bug of a rule is INTERNAL (node and
op in the message, a request id that the server log has with the traceback, counted in
xlacs_lowering_errors_total); a graph that TF's kernels refuse is INVALID_ARGUMENT naming the node, op and
input, with google.rpc details; what TF accepts but xlacs does not lower is UNIMPLEMENTED naming the attr."""
import logging
import re

import grpc
import jax.numpy as jnp
import numpy as np
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tests.graphs import GraphBuilder
from xlacs_server import metrics
from xlacs_server.graph import attrs
from xlacs_server.graph.ir import FuncRef
from xlacs_server.lower import registry

BUGGY_OP = "XlacsTestBuggyOp"  # no TF op has this name; TF's OpDef checks let it through to the lowering


@pytest.fixture
def buggy_op():
    """A lowering registered for this test only, whose rule indexes past the end of its input's shape."""
    @registry.register_op(BUGGY_OP)
    def buggy(ctx, x, *, T):
        return [jnp.reshape(x, (x.shape[x.ndim],))]  # the bug: shape[ndim] is out of range
    try:
        yield BUGGY_OP
    finally:  # ListOps and docs/ops.md count the registrations: leave none behind
        del registry._REGISTRY[(BUGGY_OP, None)]


def refusal(client, graph: GraphBuilder, fetch: str, feeds=None) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as e:
        client.compile(graph.bytes(), feeds or {}, [fetch])
    return e.value


def details_of(error: grpc.RpcError) -> dict:
    """The google.rpc details of a status, by type name."""
    found = {}
    for packed in rpc_status.from_call(error).details:
        for kind in (error_details_pb2.ErrorInfo, error_details_pb2.BadRequest, error_details_pb2.RequestInfo):
            if packed.Is(kind.DESCRIPTOR):
                found[kind.__name__] = kind()
                packed.Unpack(found[kind.__name__])
    return found


def lowering_errors(op: str) -> float:
    return metrics.CORE.get_sample_value("xlacs_lowering_errors_total", {"op": op}) or 0.0


def test_a_bug_in_a_rule_is_internal_logged_and_counted(client, buggy_op, caplog):
    graph = GraphBuilder()
    graph.placeholder("x")
    graph.op("broken", buggy_op, "x")
    before = lowering_errors(buggy_op)
    with caplog.at_level(logging.ERROR, logger="xlacs_server.rpc.errors"):
        error = refusal(client, graph, "broken:0", {"x:0": ("float32", (2, 3))})
    assert error.code() == grpc.StatusCode.INTERNAL, error.details()
    assert f"node 'broken' ({buggy_op})" in error.details() and "bug in xlacs" in error.details()
    request_id = re.search(r"request id (\w+)", error.details()).group(1)
    logged = [r for r in caplog.records if request_id in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info, caplog.text
    assert "IndexError" in caplog.text and "in buggy" in caplog.text  # the rule's frame, in the traceback
    assert lowering_errors(buggy_op) == before + 1
    details = details_of(error)
    assert details["RequestInfo"].request_id == request_id
    assert details["ErrorInfo"].reason == "LOWERING_ERROR"
    assert dict(details["ErrorInfo"].metadata) == {"node": "broken", "op": buggy_op}
    assert "BadRequest" not in details  # the request is not at fault


def assert_graph_fault(error: grpc.RpcError, node: str, op: str, input: str) -> None:
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert error.details().startswith(f"node {node!r} ({op}): ") and f"'{input}'" in error.details()
    details = details_of(error)
    assert details["ErrorInfo"].reason == "INVALID_NODE"
    assert dict(details["ErrorInfo"].metadata) == {"node": node, "op": op, "input": input}
    violation, = details["BadRequest"].field_violations
    assert violation.field == f"graph_def.node[{node}].input[{input}]"
    assert violation.description == error.details()
    assert re.fullmatch(r"\w+", details["RequestInfo"].request_id)


def test_mat_mul_of_disagreeing_matrices_blames_the_input(client):
    graph = GraphBuilder()
    graph.placeholder("a", shape=(2, 3))
    graph.const("b", np.ones((4, 5), np.float32))
    graph.op("product", "MatMul", "a", "b", transpose_a=False, transpose_b=False)
    error = refusal(client, graph, "product:0", {"a:0": ("float32", (2, 3))})
    assert_graph_fault(error, "product", "MatMul", "b")
    assert "[2, 3]" in error.details() and "[4, 5]" in error.details()


def test_conv2d_filter_of_the_wrong_depth_blames_the_filter(client):
    graph = GraphBuilder()
    graph.placeholder("x", shape=(1, 5, 5, 3))
    graph.const("filter", np.ones((3, 3, 2, 4), np.float32))
    graph.op("conv", "Conv2D", "x", "filter", strides=[1, 1, 1, 1], padding="SAME")
    error = refusal(client, graph, "conv:0", {"x:0": ("float32", (1, 5, 5, 3))})
    assert_graph_fault(error, "conv", "Conv2D", "filter")


def test_nchw_vect_c_pooling_is_unimplemented_naming_the_attr(client):
    graph = GraphBuilder()
    graph.placeholder("x", shape=(1, 1, 4, 4, 4), dtype=np.int8)
    graph.node("pooled", "MaxPool", "x", T=np.dtype(np.int8), ksize=[1, 1, 2, 2], strides=[1, 1, 2, 2],
               padding="VALID", data_format="NCHW_VECT_C")
    error = refusal(client, graph, "pooled:0", {"x:0": ("int8", (1, 1, 4, 4, 4))})
    assert error.code() == grpc.StatusCode.UNIMPLEMENTED, error.details()
    assert error.details().startswith("node 'pooled' (MaxPool): ") and "NCHW_VECT_C" in error.details()
    info = details_of(error)["ErrorInfo"]
    assert info.reason == "UNSUPPORTED_NODE"
    assert dict(info.metadata) == {"node": "pooled", "op": "MaxPool", "attr": "data_format"}


def test_a_fault_inside_a_function_body_names_the_function(client):
    """The node of a body is `function/node`, so that a user finds it."""
    graph = GraphBuilder()
    graph.placeholder("a", shape=(2, 3))
    fdef = graph.graph_def.library.function.add()
    fdef.signature.name = "product_fn"
    fdef.signature.input_arg.add(name="a", type=1)
    fdef.signature.output_arg.add(name="out", type=1)
    b = fdef.node_def.add(name="b", op="Const")
    b.attr["dtype"].CopyFrom(attrs.encode(np.dtype(np.float32)))
    b.attr["value"].CopyFrom(attrs.encode(np.ones((4, 5), np.float32)))
    m = fdef.node_def.add(name="m", op="MatMul", input=["a", "b:output:0"])
    m.attr["T"].CopyFrom(attrs.encode(np.dtype(np.float32)))
    fdef.ret["out"] = "m:product:0"
    graph.node("call", "PartitionedCall", "a", Tin=[np.dtype(np.float32)], Tout=[np.dtype(np.float32)],
               f=FuncRef("product_fn", {}))
    error = refusal(client, graph, "call:0", {"a:0": ("float32", (2, 3))})
    assert_graph_fault(error, "product_fn/m", "MatMul", "b")
