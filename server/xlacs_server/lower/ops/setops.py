"""Ops whose output shape depends on input values: Where, Unique, ListDiff.

A compiled program has static shapes, so these lower only when their inputs are compile-time constants
(they then run on the host); a runtime input is UNIMPLEMENTED (DataDependentShape).
"""
import numpy as np

from xlacs_server.lower.checks import InvalidArgument, check_axes, check_rank
from xlacs_server.lower.registry import register_op


@register_op("Where", constant_inputs=("input",), data_dependent_shape=True)
def where(ctx, input, *, T):
    return [np.argwhere(input).astype(np.int64)]


def unique(x: np.ndarray, axis: int | None, out_idx):
    """(values, idx, counts) with the values in order of first occurrence, as TF returns them. Values compare
    with ==, as in TF's kernels: -0.0 is 0.0, and a NaN equals nothing (numpy's default counts NaNs as one)."""
    _, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis,
                                          equal_nan=False)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    values = np.take(x, first[order], axis=0 if axis is None else axis)
    return [values, rank[inverse.reshape(-1)].astype(out_idx), counts[order].astype(out_idx)]


@register_op("Unique", constant_inputs=("x",), data_dependent_shape=True)
def unique_1d(ctx, x, *, T, out_idx):
    check_rank(x, "x", rank=1)
    return unique(x, None, out_idx)[:2]


@register_op("UniqueWithCounts", constant_inputs=("x",), data_dependent_shape=True)
def unique_with_counts(ctx, x, *, T, out_idx):
    check_rank(x, "x", rank=1)
    return unique(x, None, out_idx)


def unique_axis(x, axis) -> int | None:
    """UniqueV2's axis tensor: empty flattens x (which must then be a vector), else one axis."""
    if np.size(axis) > 1:
        raise InvalidArgument(f"input 'axis' {np.ravel(axis).tolist()} must hold at most one axis", input="axis")
    if np.size(axis) == 0:
        check_rank(x, "x", rank=1)
        return None
    return check_axes(axis, x.ndim, "axis")[0]


@register_op("UniqueV2", constant_inputs=("x", "axis"), data_dependent_shape=True)
def unique_v2(ctx, x, axis, *, T, Taxis, out_idx):
    return unique(x, unique_axis(x, axis), out_idx)[:2]


@register_op("UniqueWithCountsV2", constant_inputs=("x", "axis"), data_dependent_shape=True)
def unique_with_counts_v2(ctx, x, axis, *, T, Taxis, out_idx):
    return unique(x, unique_axis(x, axis), out_idx)


@register_op("ListDiff", constant_inputs=("x", "y"), data_dependent_shape=True)
def list_diff(ctx, x, y, *, T, out_idx):
    check_rank(x, "x", rank=1)
    check_rank(y, "y", rank=1)
    kept = np.flatnonzero(~np.isin(x, y))
    return [x[kept], kept.astype(out_idx)]
