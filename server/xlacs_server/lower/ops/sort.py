"""Sorting and searching: TopKV2, ApproxTopK, InTopK, InTopKV2, NthElement, LowerBound, UpperBound, Bucketize."""
import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import InvalidArgument, check_axis_attr, check_rank, check_scalar
from xlacs_server.lower.registry import register_op


@register_op("TopKV2", dtypes=D.REAL, constant_inputs=("k",))
def top_k_v2(ctx, input, k, *, T, sorted, Tk, index_type):
    check_rank(input, "input", min_rank=1)
    check_scalar(k, "k")
    k = int(k)
    if not 0 <= k <= input.shape[-1]:
        raise InvalidArgument(f"input 'k' is {k}; it must be in [0, {input.shape[-1]}], the size of the last "
                              f"dimension of input 'input' {list(input.shape)}", input="k")
    values, indices = lax.top_k(input, k)  # sorted, ties broken by the lower index, as TF
    return [values, indices.astype(index_type)]


@register_op("ApproxTopK", dtypes=(np.float16, ml_dtypes.bfloat16, np.float32))
def approx_top_k(ctx, input, *, k, T, reduction_dimension, recall_target, is_max_k, reduction_input_size_override,
                 aggregate_to_topk):
    # XLA's approximate top-k: exact (a sort) on CPU, as TF's CPU kernel; approximate on TPUs and GPUs.
    check_rank(input, "input", min_rank=1)
    dimension = check_axis_attr(reduction_dimension, input.ndim, "reduction_dimension")
    if not 0 <= k <= input.shape[dimension]:
        raise InvalidArgument(f"k={k} must be in [0, {input.shape[dimension]}], the size of dimension {dimension} "
                              f"of input 'input'", attr="k")
    search = lax.approx_max_k if is_max_k else lax.approx_min_k
    values, indices = search(input, k, reduction_dimension=reduction_dimension, recall_target=recall_target,
                             reduction_input_size_override=reduction_input_size_override,
                             aggregate_to_topk=aggregate_to_topk)
    return [values, indices.astype(np.int32)]


def _in_top_k(predictions, targets, k):
    check_rank(predictions, "predictions", rank=2)
    check_rank(targets, "targets", rank=1)
    check_scalar(k, "k")
    if targets.shape[0] != predictions.shape[0]:
        raise InvalidArgument(f"input 'targets' has {targets.shape[0]} value(s) for the {predictions.shape[0]} "
                              "rows of input 'predictions'", input="targets")
    # TF's kernel: false for a target out of range or a row with a non-finite score; otherwise true when
    # fewer than k classes score strictly higher than the target (so ties count in the target's favour).
    classes = predictions.shape[-1]
    valid = (targets >= 0) & (targets < classes) & jnp.all(jnp.isfinite(predictions), axis=-1)
    target = jnp.take_along_axis(predictions, jnp.clip(targets, 0, classes - 1)[:, None].astype(np.int32), axis=-1)
    return [valid & (jnp.sum(predictions > target, axis=-1) < k)]


@register_op("InTopKV2", dtypes=D.INDEX)
def in_top_k_v2(ctx, predictions, targets, k, *, T):
    return _in_top_k(predictions, targets, k)


@register_op("InTopK", dtypes=D.INDEX)
def in_top_k(ctx, predictions, targets, *, k, T):
    return _in_top_k(predictions, targets, k)


@register_op("NthElement", dtypes=D.REAL, constant_inputs=("n",))
def nth_element(ctx, input, n, *, T, reverse):
    check_rank(input, "input", min_rank=1)
    check_scalar(n, "n")
    n = int(n)
    if not 0 <= n < input.shape[-1]:
        raise InvalidArgument(f"input 'n' is {n}; it must be in [0, {input.shape[-1]}), the size of the last "
                              f"dimension of input 'input' {list(input.shape)}", input="n")
    return [jnp.sort(input, axis=-1)[..., -1 - n if reverse else n]]


def bound(side, ctx, sorted_inputs, values, *, T, out_type):
    """Per row of sorted_inputs: where each value of the same row of `values` would be inserted."""
    check_rank(sorted_inputs, "sorted_inputs", rank=2)
    check_rank(values, "values", rank=2)
    if sorted_inputs.shape[0] != values.shape[0]:
        raise InvalidArgument(f"inputs 'sorted_inputs' {list(sorted_inputs.shape)} and 'values' "
                              f"{list(values.shape)} must have the same number of rows", input="values")
    search = jax.vmap(functools.partial(jnp.searchsorted, side=side))
    return [search(sorted_inputs, values).astype(out_type)]


register_op("LowerBound")(functools.partial(bound, "left"))
register_op("UpperBound")(functools.partial(bound, "right"))


@register_op("Bucketize", dtypes=(np.int32, np.int64, np.float32, np.float64))
def bucketize(ctx, input, *, T, boundaries):
    # TF's kernel compares each value with float32 boundaries under C++ promotion: in double for float64
    # inputs, in float for every other type.
    if np.any(np.diff(boundaries) < 0):
        raise InvalidArgument(f"boundaries={list(boundaries)} must be sorted", attr="boundaries")
    compute = np.float64 if input.dtype == np.float64 else np.float32
    edges = np.asarray(boundaries, np.float32).astype(compute)
    return [jnp.searchsorted(edges, input.astype(compute), side="right").astype(np.int32)]
