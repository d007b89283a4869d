"""Segment reductions and counting: SegmentSum/Prod/Max/Min/Mean, UnsortedSegmentSum/Prod/Max/Min, Bincount,
DenseBincount and HistogramFixedWidth."""
import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import InvalidArgument, check_rank, check_scalar
from xlacs_server.lower.registry import register_op

COUNTABLE = (np.int32, np.int64, np.float32, np.float64)


def _limits(dtype) -> tuple:
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else ml_dtypes.finfo(dtype)
    return info.min, info.max


# kind -> (the scatter method, the identity: the value of an empty segment in the unsorted ops)
REDUCERS = {
    "sum": ("add", lambda dtype: 0),
    "prod": ("multiply", lambda dtype: 1),
    "max": ("max", lambda dtype: _limits(dtype)[0]),  # TF's lowest finite value, not -inf
    "min": ("min", lambda dtype: _limits(dtype)[1]),
}


def _segment_reduce(kind: str, data, segment_ids, num_segments: int):
    """Reduces the rows of `data` (its leading dims flattened as segment_ids' are) into num_segments rows."""
    method, identity = REDUCERS[kind]
    ids = jnp.reshape(segment_ids, (-1,))
    rows = jnp.reshape(data, ids.shape + data.shape[segment_ids.ndim:])
    ids = jnp.where(ids < 0, num_segments, ids)  # TF drops negative ids; so does an out-of-range scatter
    out = jnp.full((num_segments,) + rows.shape[1:], identity(data.dtype), data.dtype)
    return getattr(out.at[ids], method)(rows, mode="drop")


def _count(segment_ids, num_segments: int, like):
    counts = _segment_reduce("sum", jnp.ones(segment_ids.shape, like.dtype), segment_ids, num_segments)
    return jnp.reshape(counts, counts.shape + (1,) * (like.ndim - segment_ids.ndim))


def sorted_segment(kind, ctx, data, segment_ids, *, T, Tindices):
    """The V1 segment ops: as many segments as the largest id + 1; an empty one is 0 (1 for a product)."""
    check_rank(data, "data", min_rank=1)
    check_rank(segment_ids, "segment_ids", rank=1)
    if segment_ids.shape[0] != data.shape[0]:
        raise InvalidArgument(f"input 'segment_ids' has {segment_ids.shape[0]} id(s) for the {data.shape[0]} "
                              f"rows of input 'data' {list(data.shape)}: give one id per row", input="segment_ids")
    if np.any(segment_ids < 0) or np.any(np.diff(segment_ids) < 0):
        raise InvalidArgument(f"input 'segment_ids' {segment_ids.tolist()} must be sorted and non-negative; use "
                              f"UnsortedSegment{kind.capitalize()} for other ids", input="segment_ids")
    num_segments = int(segment_ids.max()) + 1 if segment_ids.size else 0
    if kind == "mean":
        total = _segment_reduce("sum", data, segment_ids, num_segments)
        count = jnp.maximum(_count(segment_ids, num_segments, data), jnp.ones((), data.dtype))
        return [lax.div(total, count.astype(total.dtype)) if jnp.issubdtype(data.dtype, jnp.integer)
                else total / count]
    out = _segment_reduce(kind, data, segment_ids, num_segments)
    if kind in ("max", "min"):
        out = jnp.where(_count(segment_ids, num_segments, data) > 0, out, jnp.zeros((), data.dtype))
    return [out]


def unsorted_segment(kind, ctx, data, segment_ids, num_segments, *, T, Tindices, Tnumsegments):
    if np.shape(data)[:np.ndim(segment_ids)] != np.shape(segment_ids):
        raise InvalidArgument(f"input 'data' has shape {list(np.shape(data))}, which must start with the shape "
                              f"{list(np.shape(segment_ids))} of input 'segment_ids'", input="segment_ids")
    return [_segment_reduce(kind, data, segment_ids, _size(num_segments, "num_segments"))]


SEGMENT_TYPES = {"sum": D.NUMERIC, "prod": D.NUMERIC, "max": D.REAL, "min": D.REAL, "mean": D.NUMERIC}
for _kind, _dtypes in SEGMENT_TYPES.items():
    register_op(f"Segment{_kind.capitalize()}", dtypes=_dtypes, constant_inputs=("segment_ids",),
                data_dependent_shape=True)(
        functools.partial(sorted_segment, _kind))
    if _kind != "mean":
        register_op(f"UnsortedSegment{_kind.capitalize()}", dtypes=_dtypes, constant_inputs=("num_segments",))(
            functools.partial(unsorted_segment, _kind))


def _size(value, input: str) -> int:
    """A constant, non-negative scalar size."""
    check_scalar(value, input)
    if value < 0:
        raise InvalidArgument(f"input {input!r} is {int(value)}; it must be non-negative", input=input)
    return int(value)


def _bincount(values, size: int, weights, binary_output: bool, dtype):
    """Counts (or sums `weights`) per value in [0, size) along the last axis; values outside are ignored."""
    if binary_output or weights is None or weights.size == 0:  # an empty weights tensor means "count"
        weights = jnp.ones(values.shape, dtype)

    def count(v, w):
        counts = jnp.zeros((size,), dtype).at[jnp.where(v < 0, size, v)].add(w.astype(dtype), mode="drop")
        return (counts > 0).astype(dtype) if binary_output else counts
    return jax.vmap(count)(values, weights) if values.ndim == 2 else count(values, weights)


@register_op("Bincount", dtypes=COUNTABLE, constant_inputs=("size",))
def bincount(ctx, arr, size, weights, *, T):
    if np.size(weights) and np.size(weights) != np.size(arr):
        raise InvalidArgument(f"input 'weights' has {np.size(weights)} value(s) for the {np.size(arr)} of input "
                              "'arr': give one weight per value, or none", input="weights")
    return [_bincount(jnp.reshape(arr, (-1,)), _size(size, "size"), jnp.reshape(weights, (-1,)), False, T)]


@register_op("DenseBincount", dtypes=COUNTABLE, constant_inputs=("size",))
def dense_bincount(ctx, input, size, weights, *, Tidx, T, binary_output):
    if np.ndim(input) > 2:
        raise InvalidArgument(f"input 'input' has shape {list(np.shape(input))}; it must have rank 1 or 2",
                              input="input")
    if np.size(weights) and np.shape(weights) != np.shape(input):
        raise InvalidArgument(f"input 'weights' has shape {list(np.shape(weights))}; it must be the shape "
                              f"{list(np.shape(input))} of input 'input', or empty", input="weights")
    return [_bincount(input, _size(size, "size"), weights, binary_output, T)]


@register_op("HistogramFixedWidth", dtypes=COUNTABLE, constant_inputs=("nbins",))
def histogram_fixed_width(ctx, values, value_range, nbins, *, T, dtype):
    # TF's kernel: the bin of x is (max(x, low) - low) / step in double, truncated, capped at nbins - 1.
    if np.shape(value_range) != (2,):
        raise InvalidArgument(f"input 'value_range' has shape {list(np.shape(value_range))}; it must be [2], "
                              "the (low, high) of the range", input="value_range")
    if _size(nbins, "nbins") == 0:
        raise InvalidArgument("input 'nbins' is 0; it must be positive", input="nbins")
    nbins = int(nbins)
    low, high = value_range[0], value_range[1]
    step = (high - low).astype(np.float64) / nbins
    bins = jnp.minimum((jnp.maximum(values, low) - low).astype(np.float64) / step, nbins - 1)
    return [_bincount(jnp.reshape(bins.astype(np.int32), (-1,)), nbins, None, False, dtype)]
