"""Gather, scatter, stitch, one-hot and value-dependent-shape ops against tf.raw_ops, through the service; what
TF refuses of them and of the segment, counting and sorting ops."""
import re

import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests.lower.refusals import Fed, assert_refused, assert_refused_as_tf, ints
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


def test_where_of_a_feed_is_unimplemented(client):
    """Its output's shape would depend on the feed's values: xlacs' limit, not the graph's fault."""
    with pytest.raises(grpc.RpcError) as e:
        compile_and_compare(client, lambda x: raw.Where(condition=x), [rand((3,), np.bool_)])
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED, e.value.details()
    assert "the shape of the output depends on the values of input 'input'" in e.value.details()


def test_scatter_nd_non_aliasing_add(client):
    compile_and_compare(client, lambda t, i, u: raw.ScatterNdNonAliasingAdd(input=t, indices=i, updates=u),
                        [rand((5, 3)), np.array([[1], [4], [1]], np.int32), rand((3, 3))])


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64], ids=ids)
def test_unravel_index(client, index_dtype):
    dims = np.array([3, 4, 5], index_dtype)
    compile_and_compare(client, lambda i, d: (raw.UnravelIndex(indices=i, dims=d),
                                              raw.UnravelIndex(indices=i[0], dims=d)),
                        [rng.integers(0, 60, size=7).astype(index_dtype), dims])


# --- What TF's kernels refuse is INVALID_ARGUMENT naming the node and the input or attr at fault -------------------

P23 = np.arange(6, dtype=np.float32).reshape(2, 3)
I32, I64, F32 = np.int32, np.int64, np.float32


# id -> (op, inputs, attrs, blamed {"input" or "attr": name}, message pattern, TF refusing the same eagerly)
REFUSED = {
    "gather_batch_dims_out_of_range": ("GatherV2", {"params": Fed((2, 3)), "indices": ints(0), "axis": ints(1)[0]},
                                       dict(Tparams=F32, Tindices=I32, Taxis=I32, batch_dims=2),
                                       {"attr": "batch_dims"}, "batch_dims=2 is out of range",
                                       lambda: raw.GatherV2(params=P23, indices=[0], axis=1, batch_dims=2)),
    "gather_of_a_scalar": ("Gather", {"params": Fed(()), "indices": ints(0)}, dict(Tparams=F32, Tindices=I32),
                           {"input": "params"}, "rank at least 1",
                           lambda: raw.Gather(params=np.float32(1), indices=[0])),
    "gather_nd_index_longer_than_rank": ("GatherNd", {"params": Fed((2, 3)), "indices": ints(0, 0, 0)[None]},
                                         dict(Tparams=F32, Tindices=I32), {"input": "indices"},
                                         "must not exceed the rank 2",
                                         lambda: raw.GatherNd(params=P23, indices=[[0, 0, 0]])),
    "scatter_updates_of_another_shape": ("TensorScatterUpdate", {"tensor": Fed((2, 3)), "indices": ints(0)[None],
                                                                 "updates": Fed((2,))},
                                         dict(T=F32, Tindices=I32), {"input": "updates"}, r"need \[1, 3\]",
                                         lambda: raw.TensorScatterUpdate(tensor=P23, indices=[[0]],
                                                                         updates=[1.0, 2.0])),
    "scatter_nd_negative_shape": ("ScatterNd", {"indices": ints(0)[None], "updates": Fed((1,)), "shape": ints(-1)},
                                  dict(T=F32, Tindices=I32), {"input": "shape"}, "negative size",
                                  lambda: raw.ScatterNd(indices=[[0]], updates=[1.0], shape=[-1])),
    "one_hot_negative_depth": ("OneHot", {"indices": Fed((2,), I32), "depth": ints(-1)[0], "on_value": F32(1),
                                          "off_value": F32(0)}, dict(T=F32, TI=I32), {"input": "depth"},
                               "must be non-negative",
                               lambda: raw.OneHot(indices=[0], depth=-1, on_value=1.0, off_value=0.0)),
    "dynamic_stitch_data_of_another_shape": ("DynamicStitch", {"indices": ints(0, 1), "data": Fed((3,))},
                                             dict(T=F32, N=1), {"input": "data[0]"}, r"indices\[0\]'s shape \[2\]",
                                             lambda: raw.DynamicStitch(indices=[[0, 1]], data=[[1.0, 2.0, 3.0]])),
    "segment_ids_not_sorted": ("SegmentSum", {"data": Fed((3, 2)), "segment_ids": ints(1, 0, 1)},
                               dict(T=F32, Tindices=I32), {"input": "segment_ids"}, "must be sorted",
                               lambda: raw.SegmentSum(data=np.zeros((3, 2), F32), segment_ids=[1, 0, 1])),
    "segment_ids_of_another_length": ("SegmentMax", {"data": Fed((3, 2)), "segment_ids": ints(0, 1)},
                                      dict(T=F32, Tindices=I32), {"input": "segment_ids"}, "one id per row",
                                      lambda: raw.SegmentMax(data=np.zeros((3, 2), F32), segment_ids=[0, 1])),
    "unsorted_segment_ids_not_a_prefix": ("UnsortedSegmentSum", {"data": Fed((3, 2)), "segment_ids": Fed((2,), I32),
                                                                 "num_segments": ints(2)[0]},
                                          dict(T=F32, Tindices=I32, Tnumsegments=I32), {"input": "segment_ids"},
                                          "must start with the shape",
                                          lambda: raw.UnsortedSegmentSum(data=np.zeros((3, 2), F32), segment_ids=[0, 1],
                                                                         num_segments=2)),
    "bincount_negative_size": ("Bincount", {"arr": Fed((2,), I32), "size": ints(-1)[0], "weights": np.zeros(0, F32)},
                               dict(T=F32), {"input": "size"}, "must be non-negative",
                               lambda: raw.Bincount(arr=[1, 2], size=-1, weights=np.zeros(0, F32))),
    "top_k_past_the_end": ("TopKV2", {"input": Fed((2,)), "k": ints(3)[0]}, dict(T=F32), {"input": "k"},
                           r"must be in \[0, 2\]", lambda: raw.TopKV2(input=[1.0, 2.0], k=3)),
    "in_top_k_targets_of_another_length": ("InTopKV2", {"predictions": Fed((1, 2)), "targets": Fed((2,), I32),
                                                        "k": ints(1)[0]}, dict(T=I32), {"input": "targets"},
                                           "for the 1 rows",
                                           lambda: raw.InTopKV2(predictions=[[1.0, 2.0]], targets=[0, 1], k=1)),
    "bounds_of_another_batch": ("LowerBound", {"sorted_inputs": Fed((1, 2)), "values": Fed((2, 1))},
                                dict(T=F32, out_type=I32), {"input": "values"}, "same number of rows",
                                lambda: raw.LowerBound(sorted_inputs=[[1.0, 2.0]], values=[[1.0], [2.0]])),
}


@pytest.mark.parametrize("case", REFUSED, ids=str)
def test_what_tf_refuses_is_invalid_argument_naming_the_input(client, case):
    assert_refused_as_tf(client, REFUSED[case])


@pytest.mark.parametrize("op,inputs,attr_values,input", [
    ("DynamicStitch", {"indices": Fed((2,), I32), "data": Fed((2,))}, dict(T=F32, N=1), "indices[0]"),
    ("SegmentSum", {"data": Fed((3,)), "segment_ids": Fed((3,), I32)}, dict(T=F32, Tindices=I32), "segment_ids"),
], ids=["DynamicStitch", "SegmentSum"])
def test_ops_whose_shape_depends_on_a_feed_are_unimplemented(client, op, inputs, attr_values, input):
    assert_refused(client, op, inputs, blame={"input": input}, code=grpc.StatusCode.UNIMPLEMENTED,
                   match=re.escape(f"the shape of the output depends on the values of input '{input}'"),
                   **attr_values)
