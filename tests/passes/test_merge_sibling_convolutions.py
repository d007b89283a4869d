"""merge_sibling_convolutions on small graphs: what it merges (before/after, the same numbers) and what it leaves
alone."""
import jax
import numpy as np
import pytest

import xlacs_server.service  # noqa: F401  (registers passes and lowerings)
from tests.graphs import GraphBuilder
from xlacs_server.lower.engine import build_program
from xlacs_server.passes.fold_batch_norm import fold_batch_norm
from xlacs_server.passes.infer_shapes import infer_shapes
from xlacs_server.passes.merge_sibling_convolutions import merge_sibling_convolutions
from xlacs_server.unit.weights import lift_weights, weight_only, weight_values

RNG = np.random.default_rng(0)
NHWC = (1, 6, 5, 8)


def weight(name, b, shape):
    return b.const(name, RNG.normal(0, 1, shape).astype(np.float32))


def siblings(data_format="NHWC", window=(1, 1), outs=(4, 3, 5), bias=True, batch_norm=False, **conv):
    """x -> one Conv2D per entry of `outs` [-> BiasAdd] [-> FusedBatchNormV3] -> Relu, each Relu fetched."""
    b = GraphBuilder()
    shape = NHWC if data_format == "NHWC" else (1, NHWC[3], NHWC[1], NHWC[2])
    b.placeholder("x", shape=shape)
    conv = {"strides": [1, 1, 1, 1], "padding": "SAME", "data_format": data_format, **conv}
    fetches = []
    for i, out in enumerate(outs):
        source = b.op(f"conv{i}", "Conv2D", "x", weight(f"w{i}", b, (*window, NHWC[3], out)), **conv)
        if bias:
            source = b.op(f"bias{i}", "BiasAdd", source, weight(f"b{i}", b, (out,)), data_format=data_format)
        if batch_norm:
            vectors = [b.const(f"bn{i}/{v}", RNG.uniform(0.5, 1.5, out).astype(np.float32))
                       for v in ("scale", "offset", "mean", "variance")]
            source = b.op(f"bn{i}", "FusedBatchNormV3", source, *vectors, U=np.dtype(np.float32), epsilon=1e-3,
                          is_training=False, data_format=data_format)
        fetches.append(b.op(f"relu{i}", "Relu", source) + ":0")
    return b, fetches


def prepared(b, fetches, extra_fetches=()):
    return infer_shapes(lift_weights(b.graph(["x:0"], [*fetches, *extra_fetches]), 64 << 10, 16))


def run(graph):
    x = np.random.default_rng(1).uniform(-1, 1, graph.feed_specs[0][1]).astype(np.float32)
    return [np.asarray(o) for o in jax.jit(build_program(graph, "cpu"))(x, *weight_values(graph))]


def ops(graph):
    return sorted(n.op for n in graph.nodes.values() if n.op in ("Conv2D", "BiasAdd", "SplitV"))


def assert_same(after, before):
    for got, want in zip(run(after), run(before)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("window", [(1, 1), (3, 3)], ids=str)
def test_siblings_become_one_convolution_one_bias_add_and_a_split(data_format, window):
    before = prepared(*siblings(data_format, window))
    after = merge_sibling_convolutions(before)
    assert ops(after) == ["BiasAdd", "Conv2D", "SplitV"]
    assert [after.nodes[f"bias{i}"].op for i in range(3)] == ["Identity"] * 3  # the names readers read stay
    assert_same(after, before)


def test_folded_batch_norms_merge_and_their_filters_concatenate_in_the_prepare_program():
    before = fold_batch_norm(prepared(*siblings(batch_norm=True)))
    after = merge_sibling_convolutions(before)
    assert ops(after) == ["BiasAdd", "Conv2D", "SplitV"]
    conv, = (n for n in after.nodes.values() if n.op == "Conv2D")
    assert after.nodes[conv.inputs[1].node].op == "ConcatV2" and conv.inputs[1].node in weight_only(after)
    assert_same(after, before)


def test_without_bias_adds_the_convolutions_merge_alone():
    before = prepared(*siblings(bias=False))
    after = merge_sibling_convolutions(before)
    assert ops(after) == ["Conv2D", "SplitV"]
    assert_same(after, before)


def test_a_fetched_convolution_merges_without_its_bias_add():
    b, fetches = siblings(outs=(4, 3))
    before = prepared(b, fetches, ["conv0:0"])
    after = merge_sibling_convolutions(before)
    assert ops(after) == ["BiasAdd", "BiasAdd", "Conv2D", "SplitV"]  # both BiasAdds stay, after the split
    assert_same(after, before)


def test_different_geometry_fed_filters_and_control_inputs_are_left_alone():
    b, fetches = siblings(outs=(4,))
    b.op("conv_strided", "Conv2D", "x", weight("w_strided", b, (1, 1, 8, 4)), strides=[1, 2, 2, 1], padding="SAME")
    b.op("conv_3x3", "Conv2D", "x", weight("w_3x3", b, (3, 3, 8, 4)), strides=[1, 1, 1, 1], padding="SAME")
    b.placeholder("w_fed", shape=(1, 1, 8, 4))
    b.op("conv_fed", "Conv2D", "x", "w_fed", strides=[1, 1, 1, 1], padding="SAME")
    b.node("conv_control", "Conv2D", "x", weight("w_control", b, (1, 1, 8, 4)), "^w_3x3", T=np.dtype(np.float32),
           strides=[1, 1, 1, 1], padding="SAME")
    graph = infer_shapes(lift_weights(b.graph(["x:0", "w_fed:0"], [
        *fetches, "conv_strided:0", "conv_3x3:0", "conv_fed:0", "conv_control:0"]), 64 << 10, 16))
    assert merge_sibling_convolutions(graph).nodes == graph.nodes
