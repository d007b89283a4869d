"""Average pooling divides by how many input elements each window covers; those counts are computed at lowering
time, so XLA is not left to constant-fold a reduce_window over a constant (InceptionV3's cold compile: 128 s
with the fold, 9 s without, on this machine). XLA:CPU's 2-D AvgPool sums shifted slices (lower/ops/cpu.py), so
there no reduce_window is left at all; the 3-D one runs the generic rule's."""
import pytest
import tensorflow as tf

from tests.oracle import compile_and_compare, rand

raw = tf.raw_ops


@pytest.mark.parametrize("ksize,strides,padding,shape", [
    ((1, 3, 3, 1), (1, 1, 1, 1), "SAME", (1, 35, 35, 8)),  # InceptionV3's pooling branches
    ((1, 3, 2, 1), (1, 2, 3, 1), "SAME", (2, 8, 9, 3)),  # windows reach into the padding along H only
    ((1, 2, 2, 1), (1, 2, 2, 1), "VALID", (1, 8, 8, 4)),
])
def test_avg_pool_reduces_no_window_and_matches_tf(client, server, ksize, strides, padding, shape):
    executable = compile_and_compare(client, lambda x: raw.AvgPool(value=x, ksize=ksize, strides=strides,
                                                                    padding=padding), [rand(shape)])
    stablehlo = server.service.loaded(executable.id).executable.stablehlo
    assert "stablehlo.reduce_window" not in stablehlo, "the window counts must not be a reduce_window"


def test_avg_pool_3d_counts(client, server):
    pool = dict(ksize=[1, 2, 3, 2, 1], strides=[1, 2, 2, 1, 1], padding="SAME")
    executable = compile_and_compare(client, lambda x: raw.AvgPool3D(input=x, **pool), [rand((1, 5, 6, 4, 2))])
    assert server.service.loaded(executable.id).executable.stablehlo.count("stablehlo.reduce_window") == 1
