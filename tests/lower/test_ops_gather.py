"""Gather, scatter, stitch, one-hot and value-dependent-shape ops against tf.raw_ops, through the service."""
import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests.oracle import compile_and_compare, ids, rand

rng = np.random.default_rng(0)
raw = tf.raw_ops


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64], ids=ids)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_], ids=ids)
def test_gather(client, dtype, index_dtype):
    def fn(params, indices, batch_indices):
        return (raw.Gather(params=params, indices=indices),
                raw.GatherV2(params=params, indices=indices, axis=tf.constant(-1)),
                raw.GatherV2(params=params, indices=batch_indices, axis=tf.constant(2), batch_dims=1),
                raw.GatherV2(params=params, indices=batch_indices[:, :, 0], axis=tf.constant(1), batch_dims=-1))
    params = rand((3, 4, 5), dtype)
    indices = rng.integers(0, 3, size=(2, 3)).astype(index_dtype)
    batch_indices = rng.integers(0, 4, size=(3, 2, 2)).astype(index_dtype)
    compile_and_compare(client, fn, [params, indices, batch_indices])


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_gather_nd(client, depth):
    params = rand((3, 4, 5))
    indices = np.stack([rng.integers(0, n, size=(2, 3)) for n in params.shape[:depth]], axis=-1).astype(np.int32)
    compile_and_compare(client, lambda p, i: raw.GatherNd(params=p, indices=i), [params, indices])


def test_gather_nd_empty_index_takes_everything(client):
    compile_and_compare(client, lambda p, i: raw.GatherNd(params=p, indices=i),
                        [rand((3, 4)), np.zeros((2, 0), np.int32)])


@pytest.mark.parametrize("op", ["TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub", "TensorScatterMax",
                                "TensorScatterMin"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=ids)
def test_tensor_scatter(client, op, dtype):
    fn = getattr(raw, op)
    indices = np.array([[0, 1], [2, 3], [1, 0]], np.int32)  # unique: TensorScatterUpdate's duplicates race in TF
    compile_and_compare(client, lambda t, i, u: fn(tensor=t, indices=i, updates=u),
                        [rand((3, 4, 2), dtype), indices, rand((3, 2), dtype)])


@pytest.mark.parametrize("dtype", [np.float32, np.int64], ids=ids)
def test_scatter_nd_adds_duplicates(client, dtype):
    indices = np.array([[1], [3], [1], [0]], np.int64)
    compile_and_compare(client, lambda i, u: raw.ScatterNd(indices=i, updates=u, shape=tf.constant([5, 3], tf.int64)),
                        [indices, rand((4, 3), dtype)])


def test_sparse_to_dense(client):
    def fn(indices, values, default, vector_indices):
        return (raw.SparseToDense(sparse_indices=indices, output_shape=tf.constant([3, 4]), sparse_values=values,
                                  default_value=default),
                raw.SparseToDense(sparse_indices=vector_indices, output_shape=tf.constant([6], tf.int64),
                                  sparse_values=default, default_value=tf.constant(-1.0)))
    compile_and_compare(client, fn, [np.array([[0, 1], [1, 3], [2, 0]], np.int32), rand((3,)),
                                     np.array(2.5, np.float32), np.array([0, 2, 5], np.int64)])


@pytest.mark.parametrize("op", ["DynamicStitch", "ParallelDynamicStitch"])
def test_dynamic_stitch(client, op):
    fn = getattr(raw, op)
    indices = [tf.constant([6, 1]), tf.constant([[4, 2], [5, 0]]), tf.constant(3)]
    compile_and_compare(client, lambda a, b, c: fn(indices=indices, data=[a, b, c]),
                        [rand((2, 3)), rand((2, 2, 3)), rand((3,))])


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=ids)
def test_one_hot(client, axis, dtype):
    indices = np.array([[0, 3, -1], [2, 4, 1]], np.int64)  # 4 and -1 are out of range: all off
    compile_and_compare(client, lambda i, on, off: raw.OneHot(indices=i, depth=tf.constant(4), on_value=on,
                                                              off_value=off, axis=axis),
                        [indices, np.array(5, dtype), np.array(-2, dtype)])


def test_invert_permutation(client):
    compile_and_compare(client, lambda x: raw.InvertPermutation(x=x), [rng.permutation(7).astype(np.int32)])


def test_value_dependent_shapes_fold_from_constants(client):
    """Where, Unique, UniqueV2, UniqueWithCounts and ListDiff run on the host when their inputs are constants."""
    values = tf.constant([4, 1, 4, 7, 1, 9, 0])

    def fn(x):
        mask = tf.constant([[True, False, True], [False, True, True]])
        where = raw.Where(condition=mask)
        y, idx = raw.Unique(x=values, out_idx=tf.int64)
        cy, cidx, counts = raw.UniqueWithCounts(x=values)
        rows, row_idx = raw.UniqueV2(x=tf.constant([[1, 2], [3, 4], [1, 2]]), axis=tf.constant([0]))
        diff, diff_idx = raw.ListDiff(x=values, y=tf.constant([1, 9]))
        return where, y, idx, cy, cidx, counts, rows, row_idx, diff, diff_idx, tf.reshape(x, tf.shape(where))
    compile_and_compare(client, fn, [rand((4, 2))])


def test_where_of_a_feed_is_not_constant(client):
    with pytest.raises(grpc.RpcError, match="input 'input' must be a compile-time constant"):
        compile_and_compare(client, lambda x: raw.Where(condition=x), [rand((3,), np.bool_)])


def test_scatter_nd_non_aliasing_add(client):
    compile_and_compare(client, lambda t, i, u: raw.ScatterNdNonAliasingAdd(input=t, indices=i, updates=u),
                        [rand((5, 3)), np.array([[1], [4], [1]], np.int32), rand((3, 3))])


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64], ids=ids)
def test_unravel_index(client, index_dtype):
    dims = np.array([3, 4, 5], index_dtype)
    compile_and_compare(client, lambda i, d: (raw.UnravelIndex(indices=i, dims=d),
                                              raw.UnravelIndex(indices=i[0], dims=d)),
                        [rng.integers(0, 60, size=7).astype(index_dtype), dims])
