"""Elementwise arithmetic, matrix products and reductions."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.ops.array import axes
from xlacs_server.lower.registry import register_op

HIGHEST = lax.Precision.HIGHEST


def unary(fn, ctx, x, *, T):
    return [fn(x)]


def binary(fn, ctx, x, y, *, T):
    return [fn(x, y)]


# TF op -> (jax function, allowed dtypes). Rules share `unary`/`binary` through functools.partial.
UNARY = {
    "Neg": (jnp.negative, D.NUMERIC),
    "Exp": (jnp.exp, D.FLOAT + D.COMPLEX),
    "Log": (jnp.log, D.FLOAT + D.COMPLEX),
    "Sqrt": (jnp.sqrt, D.FLOAT + D.COMPLEX),
    "Rsqrt": (lax.rsqrt, D.FLOAT + D.COMPLEX),
    "Square": (jnp.square, D.NUMERIC),
    "Tanh": (jnp.tanh, D.FLOAT + D.COMPLEX),
    "Sigmoid": (jax.nn.sigmoid, D.FLOAT + D.COMPLEX),
}
BINARY = {
    "Add": (jnp.add, D.NUMERIC),
    "AddV2": (jnp.add, D.NUMERIC),
    "Sub": (jnp.subtract, D.NUMERIC),
    "Mul": (jnp.multiply, D.NUMERIC),
    "RealDiv": (jnp.true_divide, D.FLOAT + D.COMPLEX),
    "Maximum": (jnp.maximum, D.REAL),
    "Minimum": (jnp.minimum, D.REAL),
}
for _op, (_fn, _dtypes) in UNARY.items():
    register_op(_op, dtypes=_dtypes)(functools.partial(unary, _fn))
for _op, (_fn, _dtypes) in BINARY.items():
    register_op(_op, dtypes=_dtypes)(functools.partial(binary, _fn))


@register_op("MatMul", dtypes=D.NUMERIC)
def mat_mul(ctx, a, b, *, T, transpose_a=False, transpose_b=False, grad_a=False, grad_b=False):
    a = a.T if transpose_a else a
    b = b.T if transpose_b else b
    return [jnp.matmul(a, b, precision=HIGHEST)]


@register_op("BatchMatMul", "BatchMatMulV2", dtypes=D.NUMERIC)
def batch_mat_mul(ctx, x, y, *, T, adj_x=False, adj_y=False, grad_x=False, grad_y=False):
    x = jnp.conj(jnp.swapaxes(x, -1, -2)) if adj_x else x
    y = jnp.conj(jnp.swapaxes(y, -1, -2)) if adj_y else y
    return [jnp.matmul(x, y, precision=HIGHEST)]


def reduction(fn, ctx, x, reduction_indices, *, T, Tidx=np.dtype(np.int32), keep_dims=False):
    axis = tuple(a % max(x.ndim, 1) for a in axes(reduction_indices))
    return [fn(x, axis=axis, keepdims=keep_dims).astype(x.dtype)]  # TF reduces in T, without widening


def _mean(x, axis, keepdims):
    if jnp.issubdtype(x.dtype, jnp.integer):  # TF divides integers with truncation
        count = int(np.prod([x.shape[a] for a in axis], dtype=np.int64))
        return lax.div(jnp.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype), jnp.asarray(max(count, 1), x.dtype))
    return jnp.mean(x, axis=axis, keepdims=keepdims)


REDUCTIONS = {
    "Sum": (jnp.sum, D.NUMERIC),
    "Mean": (_mean, D.NUMERIC),
    "Max": (jnp.max, D.REAL),
}
for _op, (_fn, _dtypes) in REDUCTIONS.items():
    register_op(_op, dtypes=_dtypes, constant_inputs=("reduction_indices",))(functools.partial(reduction, _fn))
