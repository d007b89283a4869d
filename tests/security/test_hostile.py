"""Hostile input gets a status that names what is wrong, never INTERNAL, never a crash or a hang; the
daemon answers health checks after each one."""
import sys

import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests.graphs import GraphBuilder
from tests.security.conftest import add_graph, healthy
from xlacs import dtypes, freeze, tensors
from xlacs.v1 import tf_graph_pb2, xlacs_pb2
from xlacs_server.graph import attrs
from xlacs_server.inference.v2 import grpc_service_pb2

FEEDS = {"x:0": ("float32", (2, 3))}
CLIENT_ERRORS = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.RESOURCE_EXHAUSTED}


@pytest.fixture(autouse=True)
def still_healthy(server):
    yield
    assert healthy(server.address)


def refused(call, code=grpc.StatusCode.INVALID_ARGUMENT, *named: str) -> str:
    with pytest.raises(grpc.RpcError) as e:
        call()
    assert e.value.code() == code, e.value.details()
    for text in named:
        assert text in e.value.details()
    return e.value.details()


@pytest.mark.parametrize("seed", range(20))
def test_random_bytes_as_a_graph_def(client, seed):
    data = np.random.default_rng(seed).bytes(int(np.random.default_rng(seed).integers(1, 5000)))
    for call in (lambda: client.compile(data, FEEDS, ["y:0"]), lambda: client.check(data)):
        with pytest.raises(grpc.RpcError) as e:
            call()
        assert e.value.code() in CLIENT_ERRORS, e.value.details()


def test_cycles(client):
    b = GraphBuilder()
    b.placeholder("x")
    b.op("a", "AddV2", "x", "c")
    b.op("b", "Relu", "a")
    b.op("c", "Neg", "b")
    refused(lambda: client.compile(b.bytes(), FEEDS, ["c:0"]), grpc.StatusCode.INVALID_ARGUMENT, "cycle")
    b = GraphBuilder()
    b.placeholder("x")
    b.node("self", "NoOp", "^self")  # a control edge to itself
    b.op("y", "Neg", "x", "^self")
    refused(lambda: client.compile(b.bytes(), FEEDS, ["y:0"]), grpc.StatusCode.INVALID_ARGUMENT, "cycle")


@pytest.mark.parametrize("inputs, named", [
    (("x", "missing"), "'missing', which is not in the graph"),
    (("x", "x", "^ghost"), "'ghost', which is not in the graph"),
    (("x", "x:7"), "x:7"),
])
def test_dangling_inputs(client, inputs, named):
    b = GraphBuilder()
    b.placeholder("x")
    b.op("y", "AddV2", *inputs)
    refused(lambda: client.compile(b.bytes(), FEEDS, ["y:0"]), grpc.StatusCode.INVALID_ARGUMENT, named)


def test_fetching_an_output_a_node_does_not_have(client):
    b = GraphBuilder()
    b.placeholder("x")
    b.op("y", "Neg", "x")
    refused(lambda: client.compile(b.bytes(), FEEDS, ["y:3"]), grpc.StatusCode.INVALID_ARGUMENT, "y:3")


def test_a_chain_ten_thousand_deep_compiles_without_recursion(client):
    limit = sys.getrecursionlimit()
    b = GraphBuilder()
    b.placeholder("x")
    b.const("one", np.float32(1).reshape(()))
    previous = "x"
    for i in range(10_000):
        previous = b.op(f"n{i}", "AddV2", previous, "one")
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    got, = client.compile(b.bytes(), FEEDS, [f"{previous}:0"])(x)
    np.testing.assert_array_equal(got, x + 10_000)
    assert client.check(b.bytes()).node_count == 10_002
    assert sys.getrecursionlimit() == limit


@pytest.mark.parametrize("op, inputs, attr_values, named", [
    ("Sum", ("x", "axis"), dict(T=np.dtype(np.float32), Tidx=np.dtype(np.int32), keep_dims="yes"), "'keep_dims'"),
    ("Relu", ("x",), dict(T="float32"), "'T'"),
    ("Relu", ("x",), dict(T=7), "'T'"),
    ("Reshape", ("x", "axis"), dict(T=np.dtype(np.float32), Tshape=1.5), "'Tshape'"),
    ("Transpose", ("x", "axis"), dict(T=np.dtype(np.float32), Tperm=[1, 0]), "'Tperm'"),
    ("Const", (), dict(value="hello", dtype=np.dtype(np.float32)), "'value'"),
    ("Const", (), dict(value=np.array(1, np.float32)), "['dtype']"),  # a required attr missing
    ("Split", ("axis", "x"), dict(T=np.dtype(np.float32), num_split="two"), "'num_split'"),
    ("ConcatV2", ("x", "x", "axis"), dict(T=np.dtype(np.float32), N=True, Tidx=np.dtype(np.int32)), "'N'"),
])
def test_attrs_of_the_wrong_type(client, op, inputs, attr_values, named):
    b = GraphBuilder()
    b.placeholder("x")
    b.const("axis", np.int32(0).reshape(()))
    b.node("y", op, *inputs, **attr_values)
    refused(lambda: client.compile(b.bytes(), FEEDS, ["y:0"]), grpc.StatusCode.INVALID_ARGUMENT, named,
            f"({op})")


def test_conv_strides_and_padding_of_the_wrong_type(client):
    b = GraphBuilder()
    b.node("x", "Placeholder", dtype=np.dtype(np.float32), shape=attrs.Shape((1, 4, 4, 3)))
    b.const("w", np.ones((1, 1, 3, 3), np.float32))
    b.op("c", "Conv2D", "x", "w", strides="1111", padding="SAME")
    feeds = {"x:0": ("float32", (1, 4, 4, 3))}
    refused(lambda: client.compile(b.bytes(), feeds, ["c:0"]), grpc.StatusCode.INVALID_ARGUMENT, "'strides'")
    b.graph_def.node[-1].attr["strides"].CopyFrom(attrs.encode([1, 1, 1, 1]))
    b.graph_def.node[-1].attr["padding"].CopyFrom(attrs.encode(3))
    refused(lambda: client.compile(b.bytes(), feeds, ["c:0"]), grpc.StatusCode.INVALID_ARGUMENT, "'padding'")


def const_with(fill) -> bytes:
    b = GraphBuilder()
    b.placeholder("x")
    node = b.graph_def.node.add(name="c", op="Const")
    node.attr["dtype"].type = tf_graph_pb2.DT_FLOAT
    fill(node.attr["value"].tensor)
    b.op("y", "AddV2", "x", "c")
    return b.bytes()


def shaped(*dims):
    def fill(tensor):
        tensor.dtype = tf_graph_pb2.DT_FLOAT
        tensor.tensor_shape.dim.extend(tf_graph_pb2.TensorShapeProto.Dim(size=d) for d in dims)
        return tensor
    return fill


@pytest.mark.parametrize("fill, named", [
    (lambda t: setattr(shaped(2, 3)(t), "tensor_content", b"\0" * 23), "tensor_content has 23 bytes"),
    (lambda t: setattr(shaped(3)(t), "tensor_content", b"\0" * 16), "tensor_content has 16 bytes"),
    (lambda t: shaped(2)(t).float_val.extend([1, 2, 3]), "holds 3 values"),
    (lambda t: setattr(shaped(2, -3)(t), "tensor_content", b""), "negative dimension"),
    (lambda t: shaped(-1)(t).float_val.append(1), "negative dimension"),
])
def test_tensor_content_disagreeing_with_its_shape_or_negative_dims(client, fill, named):
    refused(lambda: client.compile(const_with(fill), FEEDS, ["y:0"]), grpc.StatusCode.INVALID_ARGUMENT,
            "node 'c' (Const)", named)


def test_negative_dims_in_feeds_and_inputs(client):
    refused(lambda: client.compile(add_graph(), {"x:0": ("float32", (2, -3))}, ["y:0"]),
            grpc.StatusCode.INVALID_ARGUMENT, "a dimension is a size >= 0, or -1")
    executable = client.compile(add_graph(), FEEDS, ["y:0"])
    bad = xlacs_pb2.Tensor(name="x:0", dtype=1, shape=[-2, -3], content=b"\0" * 24)
    request = xlacs_pb2.ExecuteRequest(executable_id=executable.id, inputs=[bad])
    refused(lambda: client.stub.Execute(request, timeout=60), grpc.StatusCode.INVALID_ARGUMENT, "negative")
    request.inputs[0].shape[:] = [2, 3]
    request.inputs[0].content = b"\0" * 25
    refused(lambda: client.stub.Execute(request, timeout=60), grpc.StatusCode.INVALID_ARGUMENT, "carries 25 bytes")


def test_nan_and_inf_in_inputs_compute_as_tensorflow(client):
    x = np.array([[np.nan, np.inf, -np.inf], [0.0, -0.0, 1e38]], np.float32)
    b = GraphBuilder()
    b.placeholder("x")
    b.op("sqrt", "Sqrt", "x")
    b.op("exp", "Exp", "x")
    b.op("y", "Mul", "sqrt", "exp")
    b.const("axis", np.int32(1).reshape(()))
    b.op("max", "Max", "y", "axis", Tidx=np.dtype(np.int32), keep_dims=False)
    got = client.compile(b.bytes(), FEEDS, ["y:0", "max:0"])(x)
    y = tf.raw_ops.Mul(x=tf.raw_ops.Sqrt(x=x), y=tf.raw_ops.Exp(x=x))
    np.testing.assert_array_equal(got[0], y.numpy())
    np.testing.assert_array_equal(got[1], tf.raw_ops.Max(input=y, axis=1).numpy())


def test_nan_and_inf_in_constants_fold_as_tensorflow(client):
    b = GraphBuilder()
    b.placeholder("x")
    b.const("c", np.array([np.nan, np.inf, -1.0], np.float32))
    b.op("root", "Sqrt", "c")  # folded on the host: NaN, Inf, NaN
    b.op("y", "AddV2", "x", "root")
    x = np.ones((2, 3), np.float32)
    got, = client.compile(b.bytes(), FEEDS, ["y:0"])(x)
    np.testing.assert_array_equal(got, (x + tf.raw_ops.Sqrt(x=np.array([np.nan, np.inf, -1.0], np.float32))).numpy())


def test_duplicate_feed_and_input_names(client):
    request = xlacs_pb2.CompileRequest(graph_def=add_graph(), fetches=["y:0"], feeds=[
        xlacs_pb2.TensorSpec(name=name, dtype=1, shape=[2, 3]) for name in ("x:0", "x")])
    refused(lambda: client.stub.Compile(request, timeout=60), grpc.StatusCode.INVALID_ARGUMENT,
            "more than once")
    executable = client.compile(add_graph(), FEEDS, ["y:0"])
    one = tensors.to_proto("x:0", np.ones((2, 3), np.float32))
    request = xlacs_pb2.ExecuteRequest(executable_id=executable.id, inputs=[one, one])
    refused(lambda: client.stub.Execute(request, timeout=60), grpc.StatusCode.INVALID_ARGUMENT, "more than once")


def test_feeding_a_const(client):
    """TF lets a feed replace any tensor of its dtype and static shape, a constant's too."""
    b = GraphBuilder()
    b.placeholder("x")
    b.const("c", np.full((2, 3), 10, np.float32))
    b.op("y", "AddV2", "x", "c")
    x, c = np.ones((2, 3), np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)
    got, = client.compile(b.bytes(), {**FEEDS, "c:0": ("float32", (2, 3))}, ["y:0"])(x, c)
    np.testing.assert_array_equal(got, tf.raw_ops.AddV2(x=x, y=c).numpy())
    refused(lambda: client.compile(b.bytes(), {**FEEDS, "c:0": ("float64", (2, 3))}, ["y:0"]),
            grpc.StatusCode.INVALID_ARGUMENT, "const 'c' has dtype float32")
    refused(lambda: client.compile(b.bytes(), {**FEEDS, "c:0": ("float32", (3, 2))}, ["y:0"]),
            grpc.StatusCode.INVALID_ARGUMENT, "const 'c' has shape [2, 3]")
    refused(lambda: client.compile(b.bytes(), {**FEEDS, "c:1": ("float32", (2, 3))}, ["y:0"]),
            grpc.StatusCode.INVALID_ARGUMENT, "feed 'c:1'")


# Found by test_fuzz.py: each was INTERNAL before its fix.

@pytest.mark.parametrize("build, named", [
    (lambda b: b.op("y", "AddV2", "x"), "has 1 input(s); AddV2 takes 2"),
    (lambda b: b.op("y", "AddV2", "x", "x", "x"), "has 3 input(s); AddV2 takes 2"),
    (lambda b: b.op("y", "AddV2", "x", "x:1"), "reads x:1, but Placeholder node 'x' has 1 output(s)"),
    (lambda b: b.node("y", "ConcatV2", "x", "axis", N=1, T=np.dtype(np.float32), Tidx=np.dtype(np.int32)),
     "attr 'N' is 1, under ConcatV2's minimum of 2"),
])
def test_inputs_and_attrs_against_the_op_definition(client, build, named):
    b = GraphBuilder()
    b.placeholder("x")
    b.const("axis", np.int32(0).reshape(()))
    build(b)
    refused(lambda: client.compile(b.bytes(), FEEDS, ["y:0"]), grpc.StatusCode.INVALID_ARGUMENT, named)


def test_feeding_an_output_a_node_does_not_have(client):
    b = GraphBuilder()
    b.placeholder("x")
    b.node("nothing", "NoOp")
    b.op("y", "Neg", "x", "^nothing")
    refused(lambda: client.compile(b.bytes(), {**FEEDS, "nothing:0": ("float32", (1,))}, ["y:0"]),
            grpc.StatusCode.INVALID_ARGUMENT, "feed 'nothing:0'", "has no output 0")


def test_feeding_a_tensor_computed_from_a_weight(client):
    """The weight behind the fed tensor is pruned away; it stays a (lifted) parameter of the program."""
    b = GraphBuilder()
    b.placeholder("x", shape=(2, 8))
    b.const("w", np.ones((8, 4), np.float32))
    b.op("h", "MatMul", "x", "w", transpose_a=False, transpose_b=False)
    b.op("y", "Relu", "h")
    h = np.array([[-1, 0, 1, 2]] * 2, np.float32)
    got, = client.compile(b.bytes(), {"h:0": ("float32", (2, 4))}, ["y:0"])(h)
    np.testing.assert_array_equal(got, tf.raw_ops.Relu(features=h).numpy())


def test_string_constants_such_as_assert_messages(client):
    def checked(x):
        tf.debugging.assert_positive(x, message="x must be positive")
        return x * 2.0
    frozen = freeze(checked, tf.TensorSpec([3], tf.float32))
    x = np.array([1, 2, 3], np.float32)
    got, = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches)(x)
    np.testing.assert_array_equal(got, tf.function(checked)(x).numpy())


@pytest.mark.parametrize("data", [b"\xff" * 9, b"\x12\x05ab", b"\x12\x03\x0a\x01", b"\x08\x96\x01\x38"],
                         ids=["bad-varint", "past-the-end", "tensor-past-the-end", "group-wire-type"])
def test_bytes_that_are_no_execute_request(client, data):
    """Bytes that are no ExecuteRequest (Execute reads it with protobuf, ExecuteStream with xlacs.wire) are
    INVALID_ARGUMENT saying so, not the INTERNAL grpc gives a deserializer that raises (rpc/execute_wire.py)."""
    execute = client.channel.unary_unary("/xlacs.v1.Compiler/Execute")
    refused(lambda: execute(data, timeout=60), grpc.StatusCode.INVALID_ARGUMENT,
            "not a well-formed xlacs.v1.ExecuteRequest")
    stream = client.channel.stream_stream("/xlacs.v1.Compiler/ExecuteStream")
    refused(lambda: list(stream(iter([data]), timeout=60)), grpc.StatusCode.INVALID_ARGUMENT,
            "not a well-formed xlacs.v1.ExecuteRequest")


NOT_UTF8 = "PLACEHOLDER"  # in a request, its bytes become as many that are not UTF-8
X = xlacs_pb2.TensorSpec(name="x:0", dtype=dtypes.from_numpy(np.dtype(np.float32)), shape=(2, 3))


def compile_request(**fields) -> xlacs_pb2.CompileRequest:
    return xlacs_pb2.CompileRequest(**{"graph_def": add_graph(), "feeds": [X], "fetches": ["y:0"], **fields})


@pytest.mark.parametrize("method, request_message, field", [
    ("Compile", compile_request(feeds=[xlacs_pb2.TensorSpec(name=NOT_UTF8, dtype=X.dtype, shape=X.shape)]),
     "feeds[0].name"),
    ("Compile", compile_request(fetches=["y:0", NOT_UTF8]), "fetches[1]"),
    ("Compile", compile_request(device=NOT_UTF8), "device"),
    ("Compile", compile_request(graph_name=NOT_UTF8), "graph_name"),
    ("Execute", xlacs_pb2.ExecuteRequest(executable_id="e", inputs=[xlacs_pb2.Tensor(name=NOT_UTF8)]),
     "inputs[0].name"),
    ("ExecuteStream", xlacs_pb2.ExecuteRequest(executable_id=NOT_UTF8), "executable_id"),
    ("GetExecutable", xlacs_pb2.GetExecutableRequest(executable_id=NOT_UTF8), "executable_id"),
    ("ModelInfer", grpc_service_pb2.ModelInferRequest(model_name=NOT_UTF8), "model_name"),
])
def test_a_string_field_that_is_not_utf8(client, method, request_message, field):
    """Protobuf refuses to build such a message, so its bytes are made by hand; the status names the field and its
    bytes, where grpc would answer INTERNAL for a deserializer that raises (rpc/malformed.py)."""
    data = request_message.SerializeToString()
    assert data.count(NOT_UTF8.encode()) == 1
    data = data.replace(NOT_UTF8.encode(), b"\xff\xfe" + NOT_UTF8[2:].encode())
    path = f"/{'inference.GRPCInferenceService' if method == 'ModelInfer' else 'xlacs.v1.Compiler'}/{method}"
    identity = {"request_serializer": lambda b: b, "response_deserializer": lambda b: b}

    def call():
        if method == "ExecuteStream":
            return list(client.channel.stream_stream(path, **identity)(iter([data]), timeout=60))
        return client.channel.unary_unary(path, **identity)(data, timeout=60)
    refused(call, grpc.StatusCode.INVALID_ARGUMENT,
            f"{request_message.DESCRIPTOR.full_name}: {field} b'\\xff\\xfeACEHOLDER' is not valid UTF-8")
