"""Elementwise binary and n-ary math: arithmetic with TF's division and modulo semantics, special functions,
comparisons, logical and bitwise ops, clipping and selection."""
import functools

import jax.numpy as jnp
import jax.scipy.special as special
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import InvalidArgument, broadcast_shape, check_dtype, check_dtypes, input_names
from xlacs_server.lower.registry import register_op

FLOAT_COMPLEX = D.FLOAT + D.COMPLEX
WIDE_FLOAT = (np.float32, np.float64)  # ops whose TF kernels exist only for these
INT32_64 = (np.int32, np.int64)


def broadcastable(ctx, *operands, dtype) -> tuple[int, ...]:
    """The shape that the operands of a broadcasting op (all of `dtype`) broadcast to."""
    check_dtypes(ctx.node.op, operands, dtype)
    return broadcast_shape(*(np.shape(a) for a in operands), inputs=tuple(input_names(ctx.node.op)))


def binary(fn, ctx, x, y, *, T):
    broadcastable(ctx, x, y, dtype=T)
    return [fn(x, y)]


def _broadcasting(lax_fn):
    """A lax function made to broadcast its operands as TF's binary ops do."""
    return lambda *operands: lax_fn(*jnp.broadcast_arrays(*operands))


def _is_int(x) -> bool:
    return jnp.issubdtype(x.dtype, jnp.integer)


def _div(x, y):
    return _broadcasting(lax.div)(x, y) if _is_int(x) else x / y  # integers truncate, as in C


def _trunc_div(x, y):
    return _broadcasting(lax.div)(x, y) if _is_int(x) else jnp.trunc(x / y)


def _floor_div(x, y):
    return jnp.floor_divide(x, y) if _is_int(x) else jnp.floor(x / y)  # TF floors the float quotient


def _squared_difference(x, y):
    d = x - y
    return d * jnp.conj(d) if jnp.iscomplexobj(d) else d * d


def _zero_where(condition, value):
    return jnp.where(condition, jnp.zeros((), value.dtype), value)


def _shift(shift_fn, x, y):
    # TF's CPU kernels clamp the shift amount to [0, bits - 1]; a bare XLA shift would give 0 past the width.
    bits = np.iinfo(x.dtype).bits
    return shift_fn(x, jnp.clip(y, 0, bits - 1).astype(x.dtype))


# TF op -> (function of the two operands, allowed dtypes). Rules share `binary` through functools.partial.
BINARY = {
    "Add": (jnp.add, D.FLOAT + D.SIGNED + (np.uint8,) + D.COMPLEX),
    "AddV2": (jnp.add, D.NUMERIC),
    "Sub": (jnp.subtract, D.NUMERIC),
    "Mul": (jnp.multiply, D.NUMERIC),
    "MulNoNan": (lambda x, y: _zero_where(y == 0, x * y), FLOAT_COMPLEX),
    "Div": (_div, D.NUMERIC),
    "RealDiv": (jnp.true_divide, FLOAT_COMPLEX),
    "DivNoNan": (lambda x, y: _zero_where(y == 0, x / y), FLOAT_COMPLEX),
    "TruncateDiv": (_trunc_div, D.REAL),
    "FloorDiv": (_floor_div, D.REAL),
    "FloorMod": (jnp.remainder, D.REAL),  # the result takes the divisor's sign
    "TruncateMod": (jnp.fmod, D.FLOAT + INT32_64),  # the result takes the dividend's sign
    "Mod": (jnp.fmod, D.FLOAT + INT32_64),
    "Pow": (jnp.power, D.FLOAT + D.SIGNED + D.COMPLEX),
    "SquaredDifference": (_squared_difference, D.FLOAT + INT32_64 + D.COMPLEX),
    "Maximum": (jnp.maximum, D.REAL),
    "Minimum": (jnp.minimum, D.REAL),
    "Atan2": (jnp.arctan2, D.FLOAT),
    "Xdivy": (lambda x, y: _zero_where(x == 0, x / y), FLOAT_COMPLEX),
    "Xlogy": (lambda x, y: _zero_where(x == 0, x * jnp.log(y)), FLOAT_COMPLEX),
    "Xlog1py": (lambda x, y: _zero_where(x == 0, x * jnp.log1p(y)), FLOAT_COMPLEX),
    "Igamma": (_broadcasting(lax.igamma), D.FLOAT),
    "Igammac": (_broadcasting(lax.igammac), D.FLOAT),
    "IgammaGradA": (_broadcasting(lax.igamma_grad_a), WIDE_FLOAT),
    "RandomGammaGrad": (_broadcasting(lax.random_gamma_grad), WIDE_FLOAT),
    "Zeta": (_broadcasting(lax.zeta), WIDE_FLOAT),
    "Polygamma": (_broadcasting(lax.polygamma), WIDE_FLOAT),
    "BitwiseAnd": (jnp.bitwise_and, D.INT),
    "BitwiseOr": (jnp.bitwise_or, D.INT),
    "BitwiseXor": (jnp.bitwise_xor, D.INT),
    "LeftShift": (functools.partial(_shift, jnp.left_shift), D.INT),
    "RightShift": (functools.partial(_shift, jnp.right_shift), D.INT),  # arithmetic for signed types
    "Less": (jnp.less, D.REAL),
    "LessEqual": (jnp.less_equal, D.REAL),
    "Greater": (jnp.greater, D.REAL),
    "GreaterEqual": (jnp.greater_equal, D.REAL),
}
for _op, (_fn, _dtypes) in BINARY.items():
    register_op(_op, dtypes=_dtypes)(functools.partial(binary, _fn))


def equality(fn, ctx, x, y, *, T, incompatible_shape_error):
    check_dtypes(ctx.node.op, (x, y), T)
    try:
        broadcast_shape(np.shape(x), np.shape(y))
    except InvalidArgument:
        if incompatible_shape_error:
            raise
        return [np.array(fn is jnp.not_equal)]  # TF: tensors of incompatible shapes are simply unequal
    return [fn(x, y)]


register_op("Equal", dtypes=D.ALL)(functools.partial(equality, jnp.equal))
register_op("NotEqual", dtypes=D.ALL)(functools.partial(equality, jnp.not_equal))


@register_op("ApproximateEqual", dtypes=D.NUMERIC)
def approximate_equal(ctx, x, y, *, T, tolerance):
    check_dtypes(ctx.node.op, (x, y), T)
    if np.shape(x) != np.shape(y):
        raise InvalidArgument(f"input 'y' has shape {list(np.shape(y))}, but 'x' has {list(np.shape(x))}: they must "
                              "be the same", input="y")
    return [jnp.abs(x - y) < tolerance]


@register_op("LogicalAnd")
def logical_and(ctx, x, y):
    broadcastable(ctx, x, y, dtype=np.dtype(bool))
    return [jnp.logical_and(x, y)]


@register_op("LogicalOr")
def logical_or(ctx, x, y):
    broadcastable(ctx, x, y, dtype=np.dtype(bool))
    return [jnp.logical_or(x, y)]


@register_op("NextAfter", dtypes=WIDE_FLOAT)
def next_after(ctx, x1, x2, *, T):
    broadcastable(ctx, x1, x2, dtype=T)
    return [jnp.nextafter(x1, x2)]


@register_op("Complex", dtypes=WIDE_FLOAT)
def complex_(ctx, real, imag, *, T, Tout):
    broadcastable(ctx, real, imag, dtype=T)
    return [_broadcasting(lax.complex)(real, imag).astype(Tout)]


@register_op("Betainc", dtypes=WIDE_FLOAT)
def betainc(ctx, a, b, x, *, T):
    broadcastable(ctx, a, b, x, dtype=T)
    return [special.betainc(*jnp.broadcast_arrays(a, b, x))]


@register_op("AddN", dtypes=D.NUMERIC)
def add_n(ctx, *inputs, N, T):
    return [functools.reduce(jnp.add, same_shapes(inputs, T))]


@register_op("AccumulateNV2", dtypes=D.NUMERIC)
def accumulate_n_v2(ctx, *inputs, N, T, shape):
    return [functools.reduce(jnp.add, same_shapes(inputs, T))]


def same_shapes(inputs, dtype):
    """The `inputs` of AddN, checked: tensors of `dtype` that all have the shape of the first."""
    for i, x in enumerate(inputs):
        check_dtype(x, f"inputs:{i}", dtype)
        if np.shape(x) != np.shape(inputs[0]):
            raise InvalidArgument(f"input 'inputs:{i}' has shape {list(np.shape(x))}, but 'inputs:0' has "
                                  f"{list(np.shape(inputs[0]))}: every input must have the same shape",
                                  input=f"inputs:{i}")
    return inputs


@register_op("ClipByValue", dtypes=D.REAL)
def clip_by_value(ctx, t, clip_value_min, clip_value_max, *, T):
    check_dtypes(ctx.node.op, (t, clip_value_min, clip_value_max), T)
    for name, bound in (("clip_value_min", clip_value_min), ("clip_value_max", clip_value_max)):
        if np.ndim(bound) and np.shape(bound) != np.shape(t):
            raise InvalidArgument(f"input {name!r} has shape {list(np.shape(bound))}: it must be a scalar or have "
                                  f"the shape of 't', {list(np.shape(t))}", input=name)
    return [jnp.minimum(jnp.maximum(t, clip_value_min), clip_value_max)]


@register_op("Select", dtypes=D.ALL)
def select(ctx, condition, t, e, *, T):
    check_dtype(condition, "condition", np.dtype(bool))
    check_dtype(t, "t", T)
    check_dtype(e, "e", T)
    if np.shape(t) != np.shape(e):
        raise InvalidArgument(f"inputs 't' {list(np.shape(t))} and 'e' {list(np.shape(e))} must have the same shape",
                              input="e")
    if np.ndim(condition) and np.shape(condition) != np.shape(t) and not (
            np.ndim(condition) == 1 and np.ndim(t) >= 1 and condition.shape[0] == t.shape[0]):
        raise InvalidArgument(f"input 'condition' has shape {list(np.shape(condition))}: it must be a scalar, have "
                              f"the shape of 't', {list(np.shape(t))}, or be a vector as long as its first dimension",
                              input="condition")
    if condition.ndim == 1 and t.ndim > 1:  # a vector condition picks whole rows of t or e
        condition = jnp.reshape(condition, condition.shape + (1,) * (t.ndim - 1))
    return [jnp.where(condition, t, e)]


@register_op("SelectV2", dtypes=D.ALL)
def select_v2(ctx, condition, t, e, *, T):
    check_dtype(condition, "condition", np.dtype(bool))
    check_dtype(t, "t", T)
    check_dtype(e, "e", T)
    broadcast_shape(*(np.shape(a) for a in (condition, t, e)), inputs=("condition", "t", "e"))
    return [jnp.where(condition, t, e)]
