"""Elementwise unary math: arithmetic, trigonometry, special functions, rounding, complex parts, and gradients."""
import functools

import jax
import jax.numpy as jnp
import jax.scipy.special as special
import ml_dtypes
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import check_dtype, check_dtypes, check_same_shapes
from xlacs_server.lower.registry import register_op

FLOAT_COMPLEX = D.FLOAT + D.COMPLEX
SIGNED_NUMERIC = D.FLOAT + D.SIGNED + D.COMPLEX  # TF's Neg, Sign, Inv...: no unsigned kernels


def unary(fn, ctx, x, *, T):
    check_dtypes(ctx.node.op, (x,), T)
    return [fn(x)]


def _reciprocal(x):
    if jnp.issubdtype(x.dtype, jnp.integer):  # TF divides integers with truncation: 1 / 2 == 0
        return lax.div(jnp.ones_like(x), x)
    return 1 / x


def _round(x):
    return x if jnp.issubdtype(x.dtype, jnp.integer) else jnp.round(x)  # half to even, as TF


def _in_float32_for_half(fn):
    """`fn` computed in float32 for float16 and bfloat16 inputs."""
    def wrapped(x):
        if x.dtype.itemsize < 4:
            return fn(x.astype(np.float32)).astype(x.dtype)
        return fn(x)
    return wrapped


def _expint(x):
    return jnp.where(x < 0, jnp.nan, special.expi(x))  # TF's Ei is NaN for negative x


def _softplus(x):
    # TF's thresholds: exactly x or exp(x) where log1p(exp(x)) would lose precision or overflow.
    threshold = np.log(float(ml_dtypes.finfo(x.dtype).eps)) + 2
    return jnp.where(x > -threshold, x, jnp.where(x < threshold, jnp.exp(x), jnp.log1p(jnp.exp(x))))


# TF op -> (jax function, allowed dtypes). Rules share `unary` through functools.partial.
UNARY = {
    "Abs": (jnp.abs, D.FLOAT + D.SIGNED),
    "Neg": (jnp.negative, SIGNED_NUMERIC),
    "Sign": (jnp.sign, SIGNED_NUMERIC),
    "Square": (jnp.square, D.NUMERIC),
    "Inv": (_reciprocal, SIGNED_NUMERIC),
    "Reciprocal": (_reciprocal, SIGNED_NUMERIC),
    "Round": (_round, SIGNED_NUMERIC),
    "Rint": (jnp.rint, D.FLOAT),
    "Ceil": (jnp.ceil, D.FLOAT),
    "Floor": (jnp.floor, D.FLOAT),
    "Exp": (jnp.exp, FLOAT_COMPLEX),
    "Expm1": (jnp.expm1, FLOAT_COMPLEX),
    "Log": (jnp.log, FLOAT_COMPLEX),
    "Log1p": (jnp.log1p, FLOAT_COMPLEX),
    "Sqrt": (jnp.sqrt, FLOAT_COMPLEX),
    "Rsqrt": (lax.rsqrt, FLOAT_COMPLEX),
    "Sin": (jnp.sin, FLOAT_COMPLEX),
    "Cos": (jnp.cos, FLOAT_COMPLEX),
    "Tan": (jnp.tan, FLOAT_COMPLEX),
    "Asin": (jnp.arcsin, FLOAT_COMPLEX),
    "Acos": (jnp.arccos, FLOAT_COMPLEX),
    "Atan": (jnp.arctan, FLOAT_COMPLEX),
    "Sinh": (jnp.sinh, FLOAT_COMPLEX),
    "Cosh": (jnp.cosh, FLOAT_COMPLEX),
    "Tanh": (jnp.tanh, FLOAT_COMPLEX),
    "Asinh": (jnp.arcsinh, FLOAT_COMPLEX),
    "Acosh": (jnp.arccosh, FLOAT_COMPLEX),
    "Atanh": (jnp.arctanh, FLOAT_COMPLEX),
    "Sigmoid": (jax.nn.sigmoid, FLOAT_COMPLEX),
    "Softplus": (_softplus, D.FLOAT),
    "Softsign": (lambda x: x / (1 + jnp.abs(x)), D.FLOAT),
    "Erf": (special.erf, D.FLOAT),
    "Erfc": (special.erfc, D.FLOAT),
    "Lgamma": (lax.lgamma, D.FLOAT),
    "Digamma": (lax.digamma, D.FLOAT),
    "IsFinite": (jnp.isfinite, D.FLOAT),
    "IsInf": (jnp.isinf, D.FLOAT),
    "IsNan": (jnp.isnan, D.FLOAT),
    "Invert": (jnp.invert, D.INT),
    "PopulationCount": (lambda x: lax.population_count(x).astype(np.uint8), D.INT),
    "OnesLike": (jnp.ones_like, D.ALL),
    "ZerosLike": (jnp.zeros_like, D.ALL),
}
# jax.scipy.special functions, which take float32 and float64 only.
SPECIAL = {
    "Erfinv": special.erfinv,
    "Ndtri": special.ndtri,
    "BesselI0": special.i0,
    "BesselI0e": special.i0e,
    "BesselI1": special.i1,
    "BesselI1e": special.i1e,
    "Dawsn": special.dawsn,
    "Expint": _expint,
    "Spence": special.spence,
    "FresnelSin": lambda x: special.fresnel(x)[0],
    "FresnelCos": lambda x: special.fresnel(x)[1],
}
UNARY.update({op: (_in_float32_for_half(fn), D.FLOAT) for op, fn in SPECIAL.items()})
for _op, (_fn, _dtypes) in UNARY.items():
    register_op(_op, dtypes=_dtypes)(functools.partial(unary, _fn))


@register_op("Conj", dtypes=D.COMPLEX)
def conj(ctx, input, *, T):
    check_dtype(input, "input", T)
    return [jnp.conj(input)]


@register_op("LogicalNot")
def logical_not(ctx, x):
    check_dtype(x, "x", np.dtype(bool))
    return [jnp.logical_not(x)]


def complex_part(fn, ctx, input, *, T, Tout):
    check_dtypes(ctx.node.op, (input,), T)  # ComplexAbs names it x
    return [fn(input).astype(Tout)]


for _op, _fn in {"Real": jnp.real, "Imag": jnp.imag, "Angle": jnp.angle, "ComplexAbs": jnp.abs}.items():
    register_op(_op, dtypes=D.COMPLEX)(functools.partial(complex_part, _fn))


def output_grad(derivative, conjugate, ctx, y, dy, *, T):
    """The gradient of y = f(x) given y: dy * f'(x), with f' written in y."""
    check_same_shapes(ctx.node.op, (y, dy), T)
    d = derivative(y)
    return [dy * (jnp.conj(d) if conjugate else d)]


OUTPUT_GRADS = {  # op -> (f' written in y, whether TF conjugates it for complex types, as its kernels do)
    "SigmoidGrad": (lambda y: y * (1 - y), False),
    "TanhGrad": (lambda y: 1 - y * y, False),
    "SqrtGrad": (lambda y: 0.5 / y, True),
    "RsqrtGrad": (lambda y: -0.5 * y * y * y, True),
    "ReciprocalGrad": (lambda y: -y * y, True),
    "InvGrad": (lambda y: -y * y, True),
}
for _op, (_derivative, _conjugate) in OUTPUT_GRADS.items():
    register_op(_op, dtypes=FLOAT_COMPLEX)(functools.partial(output_grad, _derivative, _conjugate))


@register_op("SoftplusGrad", dtypes=D.FLOAT)
def softplus_grad(ctx, gradients, features, *, T):
    check_same_shapes(ctx.node.op, (gradients, features), T)
    return [gradients * jax.nn.sigmoid(features)]


@register_op("SoftsignGrad", dtypes=D.FLOAT)
def softsign_grad(ctx, gradients, features, *, T):
    check_same_shapes(ctx.node.op, (gradients, features), T)
    return [gradients / jnp.square(1 + jnp.abs(features))]
