"""The winograd pass (passes/winograd.py): 3x3 convolutions of stride 1 run as F(2x2, 3x3) on XLA:CPU, match
TensorFlow's Conv2D, transform their filters in the prepare program, and other convolutions stay convolutions."""
import numpy as np
import pytest
import tensorflow as tf

from tests.oracle import assert_close
from xlacs.freeze import freeze

RNG = np.random.default_rng(5)


def frozen_conv(x_shape, filter_shape, *, padding="SAME", strides=1, batch_norm=False, fed_filter=False):
    """A frozen 3x3 Conv2D (+ bias and ReLU, or a BatchNorm Keras freezes as a Mul and an Add) and its TF function."""
    kernel = tf.constant(RNG.normal(0, 0.3, filter_shape), tf.float32)
    bias = tf.constant(RNG.normal(0, 1, filter_shape[-1]), tf.float32)
    scale = tf.constant(RNG.uniform(0.5, 1.5, filter_shape[-1]), tf.float32)

    def conv(x, k):
        y = tf.nn.conv2d(x, k, strides, padding)
        return tf.nn.relu(y * scale + bias if batch_norm else tf.nn.bias_add(y, bias))

    specs = [tf.TensorSpec(x_shape, tf.float32)]
    if fed_filter:
        specs.append(tf.TensorSpec(filter_shape, tf.float32))
        fn = tf.function(conv)
    else:
        fn = tf.function(lambda x: conv(x, kernel))
    return freeze(fn, *specs), fn


def compiled(server, client, frozen):
    executable = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches)
    return executable, server.service.loaded(executable.id).executable


@pytest.mark.parametrize("x_shape, filter_shape, padding", [
    ((1, 8, 8, 16), (3, 3, 16, 32), "SAME"),  # whole tiles
    ((1, 7, 9, 24), (3, 3, 24, 16), "SAME"),  # odd sizes: the last tiles reach past the output
    ((1, 9, 7, 16), (3, 3, 16, 20), "VALID"),
    ((2, 5, 6, 32), (3, 3, 32, 48), "VALID"),  # a batch of two, an odd output of 3x4
    ((1, 3, 3, 16), (3, 3, 16, 16), "SAME"),  # one tile and a half
])
@pytest.mark.parametrize("batch_norm", [False, True])
def test_3x3_convolutions_run_as_winograd_and_match_tf(server, client, x_shape, filter_shape, padding, batch_norm):
    frozen, fn = frozen_conv(x_shape, filter_shape, padding=padding, batch_norm=batch_norm)
    executable, program = compiled(server, client, frozen)
    assert "stablehlo.convolution" not in program.stablehlo
    # The filter is transformed once per weight set: the per-call program takes it as [4, 4, C, K].
    c, k = filter_shape[2:]
    assert f"tensor<4x4x{c}x{k}xf32>" in program.stablehlo and f"tensor<3x3x{c}x{k}xf32>" not in program.stablehlo
    assert f"tensor<4x4x{c}x{k}xf32>" in program.prepare.stablehlo
    x = RNG.uniform(-1, 1, x_shape).astype(np.float32)
    got, = executable(x)
    assert_close(got, fn(x).numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", [
    dict(x_shape=(1, 8, 8, 16), filter_shape=(3, 3, 16, 16), strides=2),  # strided
    dict(x_shape=(1, 8, 8, 16), filter_shape=(1, 1, 16, 16)),  # 1x1: XLA makes it a dot
    dict(x_shape=(1, 8, 8, 3), filter_shape=(3, 3, 3, 16)),  # under MIN_CHANNELS in
    dict(x_shape=(1, 8, 8, 16), filter_shape=(3, 3, 16, 16), fed_filter=True),  # a filter fed per call
    dict(x_shape=(1, 100, 100, 16), filter_shape=(3, 3, 16, 16)),  # 2500 tiles, over MAX_TILES
])
def test_other_convolutions_stay_convolutions(server, client, case):
    frozen, fn = frozen_conv(**case)
    executable, program = compiled(server, client, frozen)
    assert "stablehlo.convolution" in program.stablehlo
    inputs = [RNG.uniform(-1, 1, case["x_shape"]).astype(np.float32)]
    if case.get("fed_filter"):
        inputs.append(RNG.normal(0, 0.3, case["filter_shape"]).astype(np.float32))
    got, = executable(*inputs)
    assert_close(got, fn(*inputs).numpy(), rtol=1e-4, atol=1e-5)


def test_a_client_graph_may_not_use_the_internal_ops(client):
    """_WinogradConv2D and _WinogradFilter are written by the pass only: a graph that names them is refused as an
    unsupported op, and ListOps does not list them."""
    frozen, _ = frozen_conv((1, 4, 4, 16), (3, 3, 16, 16))
    graph_def = tf.compat.v1.GraphDef.FromString(frozen.graph_def)
    conv, = [node for node in graph_def.node if node.op == "Conv2D"]
    conv.op = "_WinogradConv2D"
    assert not any(o.op.startswith("_Winograd") for o in client.ops())
    with pytest.raises(Exception, match=r"no lowering for .*_WinogradConv2D"):
        client.compile(graph_def.SerializeToString(), frozen.feeds, frozen.fetches)
