"""XLA:CPU's pooling rules (lower/ops/cpu.py): MaxPool, MaxPoolV2 and AvgPool as a max or sum of the window's
shifted slices instead of a reduce_window, against TF, and that the rewrite happened (no reduce_window in the
program) where the window is small enough; the generic rule (a GPU's) keeps its reduce_window."""
import jax
import numpy as np
import pytest
import tensorflow as tf

from tests.lower.test_ops_conv import lowered_for
from tests.oracle import assert_close, compile_and_compare, rand
from xlacs_server.lower.ops.cpu import MAX_SHIFTED_WINDOW

raw = tf.raw_ops

POOLS = [  # ksize, strides, padding, input shape
    ((1, 3, 3, 1), (1, 1, 1, 1), "SAME", (1, 9, 9, 5)),  # InceptionV3's pooling branches
    ((1, 3, 3, 1), (1, 2, 2, 1), "VALID", (2, 11, 10, 3)),  # InceptionV3's and ResNet50's max pools
    ((1, 2, 2, 1), (1, 2, 2, 1), "VALID", (1, 8, 7, 4)),  # DenseNet121's transitions
    ((1, 3, 2, 1), (1, 2, 3, 1), "SAME", (2, 8, 9, 3)),  # uneven: windows reach into the padding along H only
    ((1, 8, 8, 1), (1, 8, 8, 1), "VALID", (1, 8, 8, 6)),  # the largest window that is rewritten
]


def program(client, server, fn, args, oracle=None) -> str:
    executable = compile_and_compare(client, fn, args, oracle=oracle)
    return server.service.loaded(executable.id).executable.stablehlo


@pytest.mark.parametrize("ksize,strides,padding,shape", POOLS, ids=str)
def test_pools_are_shifted_slices_and_match_tf(client, server, ksize, strides, padding, shape):
    pool = dict(ksize=ksize, strides=strides, padding=padding)
    stablehlo = program(client, server, lambda x: (raw.MaxPool(input=x, **pool),
                                                   raw.MaxPoolV2(input=x, ksize=tf.constant(ksize),
                                                                 strides=tf.constant(strides), padding=padding),
                                                   raw.AvgPool(value=x, **pool)), [rand(shape)])
    assert "stablehlo.reduce_window" not in stablehlo
    assert stablehlo.count("stablehlo.slice") >= 3 * np.prod(ksize)


def test_max_pool_explicit_padding_and_integers(client, server):
    pool = dict(ksize=[1, 3, 2, 1], strides=[1, 2, 1, 1], padding="EXPLICIT",
                explicit_paddings=[0, 0, 2, 1, 0, 1, 0, 0])
    for dtype in (np.float32, np.int32, np.uint8):
        x = rand((1, 7, 6, 3), dtype, 0, 100) if dtype == np.uint8 else rand((1, 7, 6, 3), dtype, -100, 100)
        assert "stablehlo.reduce_window" not in program(client, server, lambda x: raw.MaxPool(input=x, **pool), [x])


def nhwc(op, **pool):
    """TF's CPU pooling kernels take NHWC only: the oracle of an NCHW pooling transposes around it."""
    to_nhwc = lambda v: [v[0], v[2], v[3], v[1]]  # noqa: E731
    return lambda x: tf.transpose(op(tf.transpose(x, (0, 2, 3, 1)), ksize=to_nhwc(pool["ksize"]),
                                     strides=to_nhwc(pool["strides"]), padding=pool["padding"]), (0, 3, 1, 2))


def test_nchw_pools(client, server):
    pool = dict(ksize=[1, 1, 3, 3], strides=[1, 1, 2, 1], padding="SAME")
    x = rand((2, 4, 7, 6))
    stablehlo = program(client, server, lambda x: (raw.MaxPool(input=x, data_format="NCHW", **pool),
                                                   raw.AvgPool(value=x, data_format="NCHW", **pool)), [x],
                        oracle=lambda x: (nhwc(tf.nn.max_pool2d, **pool)(x), nhwc(tf.nn.avg_pool2d, **pool)(x)))
    assert "stablehlo.reduce_window" not in stablehlo


def test_a_larger_window_stays_a_reduce_window(client, server):
    side = int(np.sqrt(MAX_SHIFTED_WINDOW)) + 1
    pool = dict(ksize=[1, side, side, 1], strides=[1, 1, 1, 1], padding="SAME")
    stablehlo = program(client, server, lambda x: (raw.MaxPool(input=x, **pool), raw.AvgPool(value=x, **pool)),
                        [rand((1, side + 2, side + 1, 2))])
    assert stablehlo.count("stablehlo.reduce_window") == 2


def test_the_generic_rule_keeps_its_reduce_window():
    pool = dict(ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="SAME")
    x = rand((1, 9, 9, 5))
    fn = lambda x: (raw.MaxPool(input=x, **pool), raw.AvgPool(value=x, **pool))  # noqa: E731
    lowered = lowered_for("gpu", fn, [x])
    assert lowered.as_text().count("stablehlo.reduce_window") == 2
    for got, want in zip(jax.device_get(lowered.compile()(x)), fn(tf.constant(x))):
        assert_close(got, np.asarray(want))
