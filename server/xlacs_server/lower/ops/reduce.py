"""Reductions over axes (Sum, Prod, Min, Max, Mean, All, Any, EuclideanNorm, ArgMax, ArgMin, L2Loss) and
cumulative scans (Cumsum, Cumprod, CumulativeLogsumexp)."""
import functools

import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import InvalidArgument, check_axes, check_scalar
from xlacs_server.lower.registry import register_op


def _axes(x, reduction_indices) -> tuple[int, ...]:
    return tuple(sorted(check_axes(reduction_indices, x.ndim, "reduction_indices")))


def _axis(x, axis, input: str) -> int:
    """The one axis of an arg reduction or a scan: a scalar in [-rank, rank), as TF's kernels require."""
    check_scalar(axis, input)
    return check_axes(axis, x.ndim, input)[0]


def _sum(x, axis, keepdims):
    return jnp.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)  # in T: integer sums wrap, as in TF


def _prod(x, axis, keepdims):
    return jnp.prod(x, axis=axis, keepdims=keepdims, dtype=x.dtype)


def _mean(x, axis, keepdims):
    if jnp.issubdtype(x.dtype, jnp.integer):  # TF sums in 64 bits, divides with truncation, then casts back
        wide = np.uint64 if jnp.issubdtype(x.dtype, jnp.unsignedinteger) else np.int64
        count = int(np.prod([x.shape[a] for a in axis], dtype=np.int64))
        return lax.div(_sum(x.astype(wide), axis, keepdims), jnp.asarray(max(count, 1), wide)).astype(x.dtype)
    return jnp.mean(x, axis=axis, keepdims=keepdims)


def _half_in_float32(fn):
    """fn accumulating float16 and bfloat16 in float32 and rounding once, as tf2xla's Sum, Prod and Mean do
    (XlaHelpers::SumAccumulationType): [65504, 65504, -65504] sums to 65504 in float16, not inf."""
    def reduce(x, axis, keepdims):
        if x.dtype in D.HALF:
            return fn(x.astype(np.float32), axis, keepdims).astype(x.dtype)
        return fn(x, axis, keepdims)
    return reduce


def _extremum(fn, lowest: bool):
    """Max (lowest=True) or Min; over an empty axis TF gives the identity: -inf (the lowest integer) for Max,
    +inf (the highest) for Min."""
    def reduce(x, axis, keepdims):
        if all(x.shape[a] for a in axis):
            return fn(x, axis=axis, keepdims=keepdims)
        if jnp.issubdtype(x.dtype, jnp.integer):
            identity = jnp.iinfo(x.dtype).min if lowest else jnp.iinfo(x.dtype).max
        else:
            identity = -np.inf if lowest else np.inf
        return fn(x, axis=axis, keepdims=keepdims, initial=identity)
    return reduce


def _euclidean_norm(x, axis, keepdims):
    squares = _sum(x * jnp.conj(x), axis, keepdims)
    if jnp.issubdtype(x.dtype, jnp.integer):  # TF takes the root in double and truncates back to T
        return jnp.sqrt(squares.astype(np.float64)).astype(x.dtype)
    return jnp.sqrt(squares)


def reduction(fn, ctx, input, reduction_indices, *, T, Tidx, keep_dims):
    return [fn(input, axis=_axes(input, reduction_indices), keepdims=keep_dims)]


def logical_reduction(fn, ctx, input, reduction_indices, *, Tidx, keep_dims):
    return [fn(input, axis=_axes(input, reduction_indices), keepdims=keep_dims)]


REDUCTIONS = {
    "Sum": (_half_in_float32(_sum), D.NUMERIC),
    "Prod": (_half_in_float32(_prod), D.NUMERIC),
    "Mean": (_half_in_float32(_mean), D.NUMERIC),
    "Max": (_extremum(jnp.max, lowest=True), D.REAL),
    "Min": (_extremum(jnp.min, lowest=False), D.REAL),
    "EuclideanNorm": (_euclidean_norm, D.NUMERIC),
}
for _op, (_fn, _dtypes) in REDUCTIONS.items():
    register_op(_op, dtypes=_dtypes, constant_inputs=("reduction_indices",))(functools.partial(reduction, _fn))
for _op, _fn in {"All": jnp.all, "Any": jnp.any}.items():
    register_op(_op, constant_inputs=("reduction_indices",))(functools.partial(logical_reduction, _fn))


def arg_reduction(fn, ctx, input, dimension, *, T, Tidx, output_type):
    axis = _axis(input, dimension, "dimension")
    outputs = int(np.prod(np.delete(input.shape, axis)))
    if input.shape[axis] == 0 and outputs:  # TF's kernel refuses too: an empty dimension has no index to return
        raise InvalidArgument(f"input 'input' has shape {list(input.shape)}: dimension {axis} is empty, so it has "
                              f"no {ctx.node.op} index; reduce over a non-empty dimension", input="input")
    return [fn(input, axis=axis).astype(output_type)]  # ties go to the lowest index, as in TF


for _op, _fn in {"ArgMax": jnp.argmax, "ArgMin": jnp.argmin}.items():
    register_op(_op, dtypes=D.REAL + (np.bool_,), constant_inputs=("dimension",))(functools.partial(arg_reduction, _fn))


@register_op("L2Loss", dtypes=D.FLOAT)
def l2_loss(ctx, t, *, T):
    return [jnp.sum(jnp.square(t)) / 2]


def cumulative(scan, identity, ctx, x, axis, *, T, Tidx, exclusive, reverse):
    axis = _axis(x, axis, "axis")
    if exclusive:  # shift the input by one along the scan, bringing in the identity element
        n = x.shape[axis]
        pad = [(0, 0)] * x.ndim
        pad[axis] = (0, 1) if reverse else (1, 0)
        x = jnp.pad(x, pad, constant_values=identity)
        x = lax.slice_in_dim(x, 1, n + 1, axis=axis) if reverse else lax.slice_in_dim(x, 0, n, axis=axis)
    return [scan(x, axis=axis, reverse=reverse)]


CUMULATIVE = {
    "Cumsum": (lax.cumsum, 0, D.NUMERIC),
    "Cumprod": (lax.cumprod, 1, D.NUMERIC),
    "CumulativeLogsumexp": (lax.cumlogsumexp, -np.inf, D.FLOAT),
}
for _op, (_scan, _identity, _dtypes) in CUMULATIVE.items():
    register_op(_op, dtypes=_dtypes, constant_inputs=("axis",))(functools.partial(cumulative, _scan, _identity))
