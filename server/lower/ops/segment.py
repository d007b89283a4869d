"""Segment reductions and counting: SegmentSum/Prod/Max/Min/Mean, UnsortedSegmentSum/Prod/Max/Min, Bincount,
DenseBincount and HistogramFixedWidth."""
import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.ops.array import INT32
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


def sorted_segment(kind, ctx, data, segment_ids, *, T, Tindices=INT32):
    """The V1 segment ops: as many segments as the largest id + 1; an empty one is 0 (1 for a product)."""
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


def unsorted_segment(kind, ctx, data, segment_ids, num_segments, *, T, Tindices=INT32, Tnumsegments=INT32):
    return [_segment_reduce(kind, data, segment_ids, int(num_segments))]


SEGMENT_TYPES = {"sum": D.NUMERIC, "prod": D.NUMERIC, "max": D.REAL, "min": D.REAL, "mean": D.NUMERIC}
for _kind, _dtypes in SEGMENT_TYPES.items():
    register_op(f"Segment{_kind.capitalize()}", dtypes=_dtypes, constant_inputs=("segment_ids",))(
        functools.partial(sorted_segment, _kind))
    if _kind != "mean":
        register_op(f"UnsortedSegment{_kind.capitalize()}", dtypes=_dtypes, constant_inputs=("num_segments",))(
            functools.partial(unsorted_segment, _kind))


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
    return [_bincount(jnp.reshape(arr, (-1,)), int(size), jnp.reshape(weights, (-1,)), False, T)]


@register_op("DenseBincount", dtypes=COUNTABLE, constant_inputs=("size",))
def dense_bincount(ctx, input, size, weights, *, Tidx, T, binary_output=False):
    return [_bincount(input, int(size), weights, binary_output, T)]


@register_op("HistogramFixedWidth", dtypes=COUNTABLE, constant_inputs=("nbins",))
def histogram_fixed_width(ctx, values, value_range, nbins, *, T, dtype=INT32):
    # TF's kernel: the bin of x is (max(x, low) - low) / step in double, truncated, capped at nbins - 1.
    nbins = int(nbins)
    low, high = value_range[0], value_range[1]
    step = (high - low).astype(np.float64) / nbins
    bins = jnp.minimum((jnp.maximum(values, low) - low).astype(np.float64) / step, nbins - 1)
    return [_bincount(jnp.reshape(bins.astype(np.int32), (-1,)), nbins, None, False, dtype)]
