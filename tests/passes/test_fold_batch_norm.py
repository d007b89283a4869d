"""fold_batch_norm on small graphs: what it folds (before/after, the same numbers) and what it leaves alone."""
import jax
import numpy as np
import pytest

import xlacs_server.service  # noqa: F401  (registers passes and lowerings)
from tests.graphs import GraphBuilder
from xlacs_server.lower.engine import build_program
from xlacs_server.passes.fold_batch_norm import fold_batch_norm
from xlacs_server.passes.infer_shapes import infer_shapes
from xlacs_server.unit.weights import lift_weights, weight_values

RNG = np.random.default_rng(0)
X_SHAPE = (1, 5, 5, 3)


def vector(n=4):
    return RNG.uniform(0.5, 1.5, n).astype(np.float32)


def batch_norm_graph(b: GraphBuilder, source: str, *, channels=4, data_format="NHWC", is_training=False,
                     fetch_statistics=False, fed_scale=False, fetch=()):
    """`source` -> FusedBatchNormV3 -> Relu, fetched; weights lifted."""
    if fed_scale:
        b.placeholder("scale", shape=(channels,))
    else:
        b.const("scale", vector(channels))
    for name in ("offset", "mean", "variance"):
        b.const(name, vector(channels))
    b.op("bn", "FusedBatchNormV3", source, "scale", "offset", "mean", "variance", U=np.dtype(np.float32), epsilon=1e-3,
         is_training=is_training, data_format=data_format)
    b.op("relu", "Relu", "bn")
    feeds = ["x:0"] + (["scale:0"] if fed_scale else [])
    fetches = ["relu:0", *fetch] + (["bn:1"] if fetch_statistics else [])
    return infer_shapes(lift_weights(b.graph(feeds, fetches), 64 << 10, 16))


def convolution(op="Conv2D", filter_shape=(3, 3, 3, 4), data_format="NHWC") -> GraphBuilder:
    """x -> `op` (as "conv") with a constant filter."""
    b = GraphBuilder()
    b.placeholder("x", shape=X_SHAPE if data_format == "NHWC" else (1, 3, 5, 5))
    b.const("w", RNG.normal(0, 1, filter_shape).astype(np.float32))
    b.op("conv", op, "x", "w", strides=[1, 1, 1, 1], padding="SAME", data_format=data_format)
    return b


def conv_graph(op="Conv2D", bias=True, filter_shape=(3, 3, 3, 4), data_format="NHWC", **kwargs):
    b = convolution(op, filter_shape, data_format)
    source = "conv"
    if bias:
        b.const("b", vector(kwargs.get("channels", 4)))
        source = b.op("bias", "BiasAdd", "conv", "b", data_format=data_format)
    return batch_norm_graph(b, source, data_format=data_format, **kwargs)


def run(graph, *feeds):
    return [np.asarray(o) for o in jax.jit(build_program(graph, "cpu"))(*feeds, *weight_values(graph))]


def x(shape=X_SHAPE):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.parametrize("bias", [True, False])
def test_conv_bias_batch_norm_becomes_conv_with_scaled_filter_and_one_bias(bias):
    before = conv_graph(bias=bias)
    after = fold_batch_norm(before)
    ops = {n.name: n.op for n in after.nodes.values()}
    assert "FusedBatchNormV3" not in ops.values() and "bias" not in ops
    assert ops["bn"] == "BiasAdd"  # the readers of bn:0 read the folded output
    assert after.nodes["conv"].inputs[1].node == "bn/folded/filter"
    inputs = x()
    np.testing.assert_allclose(run(after, inputs)[0], run(before, inputs)[0], rtol=1e-5, atol=1e-5)


def test_depthwise_filter_is_scaled_per_input_channel_and_multiplier():
    before = conv_graph("DepthwiseConv2dNative", filter_shape=(3, 3, 3, 2), channels=6)
    after = fold_batch_norm(before)
    assert "FusedBatchNormV3" not in {n.op for n in after.nodes.values()}
    scale_shape = after.nodes["bn/folded/filter_scale/shape"].attrs["value"]
    np.testing.assert_array_equal(scale_shape, [3, 2])
    inputs = x()
    np.testing.assert_allclose(run(after, inputs)[0], run(before, inputs)[0], rtol=1e-5, atol=1e-5)


def test_nchw_batch_norm_adds_its_bias_on_the_channel_axis():
    before = conv_graph(data_format="NCHW")
    after = fold_batch_norm(before)
    assert after.nodes["bn"].op == "BiasAdd" and after.nodes["bn"].attrs["data_format"] == "NCHW"
    inputs = x((1, 3, 5, 5))
    np.testing.assert_allclose(run(after, inputs)[0], run(before, inputs)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("transpose_b", [False, True])
def test_keras_mul_form_after_matmul_scales_the_weights(transpose_b):
    """Frozen Keras graphs compute a BatchNorm as x * s + (offset - mean * s): the Mul folds, the Add stays."""
    b = GraphBuilder()
    b.placeholder("x", shape=(2, 3))
    b.const("w", RNG.normal(0, 1, (4, 3) if transpose_b else (3, 4)).astype(np.float32))
    b.op("mm", "MatMul", "x", "w", transpose_a=False, transpose_b=transpose_b)
    b.const("s", vector())
    b.op("scaled", "Mul", "s", "mm")  # either operand order
    b.const("shift", vector())
    b.op("y", "AddV2", "scaled", "shift")
    before = infer_shapes(lift_weights(b.graph(["x:0"], ["y:0"]), 64 << 10, 16))
    after = fold_batch_norm(before)
    assert after.nodes["scaled"].op == "MatMul" and "mm" not in after.nodes
    inputs = x((2, 3))
    np.testing.assert_allclose(run(after, inputs)[0], run(before, inputs)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", [{"is_training": True}, {"fetch_statistics": True}, {"fed_scale": True}])
def test_training_read_statistics_and_fed_parameters_are_left_alone(case):
    graph = conv_graph(**case)
    assert fold_batch_norm(graph).nodes == graph.nodes


def test_a_convolution_read_elsewhere_is_left_alone():
    b = convolution()
    b.op("other", "Neg", "conv")
    graph = batch_norm_graph(b, "conv", fetch=["other:0"])
    assert fold_batch_norm(graph).nodes == graph.nodes


def test_a_mul_by_a_per_position_weight_is_left_alone():
    b = convolution()
    b.const("positions", RNG.normal(0, 1, (1, 5, 5, 4)).astype(np.float32))
    b.op("y", "Mul", "conv", "positions")
    graph = infer_shapes(lift_weights(b.graph(["x:0"], ["y:0"]), 64 << 10, 16))
    assert fold_batch_norm(graph).nodes == graph.nodes
