"""What the client sends again when a replica goes away (UNAVAILABLE), against a gRPC server that answers every
call so: the calls safe to repeat (Compile, by gRPC's retry policy; a plain Execute, once), and not an Execute
that keeps its outputs on the daemon, whose first attempt may have run there."""
import collections
from concurrent import futures

import grpc
import numpy as np
import pytest

from tests.graphs import GraphBuilder
from xlacs import Client
from xlacs.v1 import xlacs_pb2

SERVICE = "xlacs.v1.Compiler"


class Unavailable:
    """A server of xlacs.v1.Compiler whose Compile answers (once `compiles` allows) and whose every other call
    fails with UNAVAILABLE, counting the calls by method."""

    def __init__(self, compiles: bool):
        self.compiles = compiles
        self.calls = collections.Counter()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {
            "Compile": grpc.unary_unary_rpc_method_handler(
                self.compile, xlacs_pb2.CompileRequest.FromString, xlacs_pb2.CompileResponse.SerializeToString),
            "Execute": grpc.unary_unary_rpc_method_handler(
                self.unavailable("Execute"), xlacs_pb2.ExecuteRequest.FromString,
                xlacs_pb2.ExecuteResponse.SerializeToString)})])
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    def compile(self, request, context):
        self.calls["Compile"] += 1
        if not self.compiles:
            context.abort(grpc.StatusCode.UNAVAILABLE, "the replica went away")
        spec = xlacs_pb2.TensorSpec(name="x:0", dtype=1, shape=[2])  # DT_FLOAT
        return xlacs_pb2.CompileResponse(executable_id="e1", cache="miss", signature=xlacs_pb2.Signature(
            inputs=[spec], outputs=[xlacs_pb2.TensorSpec(name="y:0", dtype=1, shape=[2])]))

    def unavailable(self, method: str):
        def answer(request, context):
            self.calls[method] += 1
            context.abort(grpc.StatusCode.UNAVAILABLE, "the replica went away")
        return answer

    def __enter__(self) -> "Unavailable":
        self.server.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.stop(grace=None)


def graph() -> bytes:
    b = GraphBuilder()
    b.op("y", "Neg", b.placeholder("x", (2,)))
    return b.graph_def


def test_compile_is_tried_four_times_then_unavailable():
    with Unavailable(compiles=False) as server, Client(f"127.0.0.1:{server.port}", timeout=60) as client:
        with pytest.raises(grpc.RpcError) as failed:
            client.compile(graph(), {"x:0": (np.float32, (2,))}, ["y:0"])
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    assert server.calls["Compile"] == 4  # the retry policy's maxAttempts


def test_a_plain_execute_is_sent_twice_and_one_that_keeps_its_outputs_once():
    with Unavailable(compiles=True) as server, Client(f"127.0.0.1:{server.port}", timeout=60) as client:
        executable = client.compile(graph(), {"x:0": (np.float32, (2,))}, ["y:0"])
        with pytest.raises(grpc.RpcError) as plain:
            executable(np.ones(2, np.float32))
        assert plain.value.code() == grpc.StatusCode.UNAVAILABLE and server.calls["Execute"] == 2
        with pytest.raises(grpc.RpcError) as kept:
            executable.execute([np.ones(2, np.float32)], keep=True)
        assert kept.value.code() == grpc.StatusCode.UNAVAILABLE and server.calls["Execute"] == 3
