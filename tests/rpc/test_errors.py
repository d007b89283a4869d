"""Every error of the Compile/Execute path is a gRPC status a user can act on; the daemon keeps serving."""
import logging
import re
from concurrent import futures

import grpc
import numpy as np
import pytest
import tensorflow as tf
from grpc_health.v1 import health_pb2, health_pb2_grpc

from xlacs import error_details
from xlacs_server.errors import InvalidNode
from xlacs_server.rpc.errors import ErrorInterceptor
from xlacs_server.counters import Counters


def graph_def(build) -> bytes:
    g = tf.Graph()
    with g.as_default():
        build()
    return g.as_graph_def().SerializeToString()


def add_graph() -> bytes:
    def build():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
        tf.identity(x + 1.0, name="y")
    return graph_def(build)


def code_and_details(excinfo) -> tuple[grpc.StatusCode, str]:
    return excinfo.value.code(), excinfo.value.details()


def test_malformed_graph_def(client):
    with pytest.raises(grpc.RpcError) as e:
        client.compile(b"\xff\x00garbage" * 10, {"x:0": ("float32", [2])}, ["y:0"])
    code, details = code_and_details(e)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "GraphDef" in details


@pytest.mark.parametrize("feeds,fetches,named", [
    ({"nope:0": ("float32", [2, 3])}, ["y:0"], "nope:0"),
    ({"x:0": ("float32", [2, 3])}, ["missing_fetch:0"], "missing_fetch:0"),
])
def test_unknown_feed_or_fetch(client, feeds, fetches, named):
    with pytest.raises(grpc.RpcError) as e:
        client.compile(add_graph(), feeds, fetches)
    code, details = code_and_details(e)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and named in details


def test_unsupported_ops_listed_before_compiling(client, server):
    def build():
        s = tf.compat.v1.placeholder(tf.string, [2], name="s")
        joined = tf.strings.join([s, s], name="joined")
        tf.strings.length(joined, name="length")
        tf.strings.regex_replace(s, "a", "b", name="replaced")
    before = server.service.counters.compiles
    with pytest.raises(grpc.RpcError) as e:
        client.compile(graph_def(build), {"x:0": ("float32", [1])}, ["length:0", "replaced:0"])
    code, details = code_and_details(e)
    assert code == grpc.StatusCode.INVALID_ARGUMENT  # the string feed x:0 does not exist
    with pytest.raises(grpc.RpcError) as e:
        client.compile(graph_def(build), {}, ["length:0", "replaced:0"])
    code, details = code_and_details(e)
    assert code == grpc.StatusCode.UNIMPLEMENTED
    for op, node in (("StringJoin", "joined"), ("StringLength", "length"), ("StaticRegexReplace", "replaced")):
        assert f"{op} (node '{node}')" in details
    assert server.service.counters.compiles == before


def test_execute_wrong_dtype_and_shape(client):
    executable = client.compile(add_graph(), {"x:0": ("float32", [2, 3])}, ["y:0"])
    with pytest.raises(grpc.RpcError) as e:
        executable(np.zeros((2, 3), np.float64))
    code, details = code_and_details(e)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "expected float32[2, 3], got float64[2, 3]" in details
    with pytest.raises(grpc.RpcError) as e:
        executable(np.zeros((3, 2), np.float32))
    assert "expected float32[2, 3], got float32[3, 2]" in e.value.details()
    np.testing.assert_array_equal(executable(np.ones((2, 3), np.float32))[0], np.full((2, 3), 2, np.float32))


def test_execute_unknown_and_missing_inputs_are_named(client):
    executable = client.compile(add_graph(), {"x:0": ("float32", [2, 3])}, ["y:0"])
    with pytest.raises(grpc.RpcError) as e:
        executable.execute({"z:0": np.zeros((2, 3), np.float32)})
    code, details = code_and_details(e)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "takes inputs ['x:0']; unknown: ['z:0'], missing: ['x:0']" in details
    with pytest.raises(grpc.RpcError) as e:
        executable.execute({})
    assert "unknown: [], missing: ['x:0']" in e.value.details()


def test_unknown_executable_id(client):
    with pytest.raises(grpc.RpcError) as e:
        client.stub.Execute(__import__("xlacs.v1.xlacs_pb2", fromlist=["x"]).ExecuteRequest(executable_id="nope-123"))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND and "nope-123" in e.value.details()


def test_non_constant_input_names_node_and_input(client):
    def build():
        x = tf.compat.v1.placeholder(tf.float32, [6], name="x")
        shape = tf.compat.v1.placeholder(tf.int32, [2], name="shape")
        tf.reshape(x, shape, name="reshaped")
    with pytest.raises(grpc.RpcError) as e:
        client.compile(graph_def(build), {"x:0": ("float32", [6]), "shape:0": ("int32", [2])}, ["reshaped:0"])
    code, details = code_and_details(e)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "'reshaped'" in details and "'shape'" in details and "compile-time constant" in details


def test_feed_dtype_disagrees_with_placeholder(client):
    with pytest.raises(grpc.RpcError) as e:
        client.compile(add_graph(), {"x:0": ("int32", [2, 3])}, ["y:0"])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "placeholder 'x'" in e.value.details()


def test_server_still_healthy(server):
    with grpc.insecure_channel(server.address) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_unexpected_exception_is_internal_with_logged_request_id(caplog):
    """A real server whose handler has a bug: the interceptor turns it into INTERNAL with a logged id."""
    def buggy(request, context):
        raise KeyError("a bug")
    handler = grpc.method_handlers_generic_handler("test.Buggy", {"Call": grpc.unary_unary_rpc_method_handler(
        buggy, request_deserializer=lambda b: b, response_serializer=lambda b: b)})
    server = grpc.server(futures.ThreadPoolExecutor(2), interceptors=[ErrorInterceptor(Counters())])
    server.add_generic_rpc_handlers([handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with caplog.at_level(logging.ERROR), grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.RpcError) as e:
                channel.unary_unary("/test.Buggy/Call")(b"")
        assert e.value.code() == grpc.StatusCode.INTERNAL
        request_id = re.search(r"request id (\w+)", e.value.details()).group(1)
        assert request_id in caplog.text
    finally:
        server.stop(None)


STREAM_KINDS = {"unary_stream": grpc.unary_stream_rpc_method_handler,
                "stream_stream": grpc.stream_stream_rpc_method_handler}


@pytest.fixture
def streaming_server():
    """A real server with the error interceptor whose streaming handlers send one message, then fail with the
    error their method names: a typed XlacsError (the graph's fault) or a plain exception (a bug)."""
    errors = {"Typed": lambda: InvalidNode("conv", "Conv2D", "input 'filter' is wrong", input="filter"),
              "Bug": lambda: KeyError("a bug")}

    def handler(error):
        def stream(request, context):
            yield b"first"
            raise error()
        return stream
    handlers = {f"{name}_{kind}": make(handler(error), request_deserializer=lambda b: b,
                                       response_serializer=lambda b: b)
                for kind, make in STREAM_KINDS.items() for name, error in errors.items()}
    server = grpc.server(futures.ThreadPoolExecutor(2), interceptors=[ErrorInterceptor(Counters())])
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Streams", handlers)])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None)


def call_stream(address: str, method: str, kind: str) -> tuple[list, grpc.RpcError]:
    """The messages the stream sent before failing, and its error."""
    received = []
    with grpc.insecure_channel(address) as channel:
        if kind == "unary_stream":
            responses = channel.unary_stream(f"/test.Streams/{method}")(b"", timeout=30)
        else:
            responses = channel.stream_stream(f"/test.Streams/{method}")(iter([b"", b""]), timeout=30)
        with pytest.raises(grpc.RpcError) as e:
            for response in responses:
                received.append(response)
    return received, e.value


@pytest.mark.parametrize("kind", STREAM_KINDS)
def test_streaming_handlers_map_typed_errors(streaming_server, kind):
    received, error = call_stream(streaming_server, "Typed_" + kind, kind)
    assert received == [b"first"]
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == "node 'conv' (Conv2D): input 'filter' is wrong"
    details = error_details(error)
    assert details.reason == "INVALID_NODE"
    assert details.metadata == {"node": "conv", "op": "Conv2D", "input": "filter"}
    assert details.field_violations == [("graph_def.node[conv].input[filter]", error.details())]
    assert re.fullmatch(r"[0-9a-f]{16}", details.request_id)


@pytest.mark.parametrize("kind", STREAM_KINDS)
def test_streaming_handlers_turn_bugs_into_internal_with_a_logged_request_id(streaming_server, kind, caplog):
    with caplog.at_level(logging.ERROR, logger="xlacs_server.rpc.errors"):
        received, error = call_stream(streaming_server, "Bug_" + kind, kind)
    assert received == [b"first"]
    assert error.code() == grpc.StatusCode.INTERNAL
    request_id = re.search(r"request id (\w+)", error.details()).group(1)
    assert f"internal error in Bug_{kind}" in error.details() and "a bug" not in error.details()
    assert error_details(error).request_id == request_id
    logged = [r for r in caplog.records if request_id in r.getMessage()]
    assert len(logged) == 1 and "KeyError: 'a bug'" in caplog.text
