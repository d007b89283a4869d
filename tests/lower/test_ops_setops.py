"""Unique, UniqueWithCounts and their V2 forms against TF: vectors and slices along an axis, the axis and index
dtypes, and TF's equality (-0.0 is 0.0, a NaN equals nothing). Their x is a constant, so they run on the host;
a gather by their idx on the feed makes the compiled program use them."""
import numpy as np
import pytest
import tensorflow as tf

from tests.oracle import compile_and_compare, ids

raw = tf.raw_ops
NAN = np.nan

VECTORS = {
    "int32": np.array([4, 1, 4, 7, 1, 9, 0, 4], np.int32),
    "int64": np.array([2 ** 40, -3, 2 ** 40, 5], np.int64),
    "floats": np.array([NAN, 1.5, NAN, -0.0, 0.0, 1.5, 2.0, -0.0], np.float32),
    "empty": np.zeros((0,), np.float32),
}


def gathered_by_idx(feed, idx):
    return tf.gather(feed, idx)


@pytest.mark.parametrize("out_idx", [np.int32, np.int64], ids=ids)
@pytest.mark.parametrize("name", sorted(VECTORS))
def test_unique_of_a_vector(client, name, out_idx):
    x = VECTORS[name]

    def fn(feed):
        values, idx = raw.Unique(x=x, out_idx=out_idx)
        counted = raw.UniqueWithCounts(x=x, out_idx=out_idx)
        return values, idx, *counted, gathered_by_idx(feed, idx)
    compile_and_compare(client, fn, [np.arange(x.size, dtype=np.float32)])


@pytest.mark.parametrize("axis", [[], [0], [-1]], ids=str)
@pytest.mark.parametrize("name", sorted(VECTORS))
def test_unique_v2_of_a_vector(client, name, axis):
    x = VECTORS[name]

    def fn(feed):
        axis_tensor = tf.constant(axis, tf.int64)
        values, idx = raw.UniqueV2(x=x, axis=axis_tensor)
        return values, idx, *raw.UniqueWithCountsV2(x=x, axis=axis_tensor), gathered_by_idx(feed, idx)
    compile_and_compare(client, fn, [np.arange(x.size, dtype=np.float32)])


SLICES = {  # name -> (x, axis)
    "rows": (np.array([[1, 2], [3, 4], [1, 2], [1, 3]], np.int32), 0),
    "columns": (np.array([[1, 2, 1, 2], [3, 4, 3, 5]], np.int64), 1),
    "last_axis": (np.array([[[1, 2, 1], [0, 0, 0]], [[5, 6, 5], [7, 7, 7]]], np.int32), -1),
    "middle_axis": (np.array([[[1, 2], [3, 4], [1, 2]], [[0, 0], [1, 1], [0, 0]]], np.float32), 1),
    # -0.0 rows equal 0.0 rows; a row holding a NaN equals no other row
    "float_rows": (np.array([[NAN, 1], [NAN, 1], [0, -0.0], [-0.0, 0], [2, 3], [2, 3]], np.float32), 0),
}


@pytest.mark.parametrize("axis_dtype", [np.int32, np.int64], ids=ids)
@pytest.mark.parametrize("name", sorted(SLICES))
def test_unique_v2_along_an_axis(client, name, axis_dtype):
    x, axis = SLICES[name]

    def fn(feed):
        axis_tensor = tf.constant([axis], axis_dtype)
        values, idx = raw.UniqueV2(x=x, axis=axis_tensor, out_idx=tf.int64)
        return values, idx, *raw.UniqueWithCountsV2(x=x, axis=axis_tensor), gathered_by_idx(feed, idx)
    compile_and_compare(client, fn, [np.arange(x.shape[axis], dtype=np.float32)])
