"""Arithmetic that rounds as TF's kernels do where XLA would round differently: its algebraic simplifier
rewrites divisions and reassociates constants, and XLA:CPU fuses a * b + c into one multiply-add that skips
the product's rounding. This matters where a result is then floored or rounded (quantization steps).

`rounded` is the tool: float64 arithmetic whose every result is rounded to the narrow type's precision by
reduce_precision, which XLA emits as integer bit operations that neither it nor LLVM fuse or reorder.
"""
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

# dtype -> (exponent bits, mantissa bits): what reduce_precision rounds a float64 to
FORMATS = {np.dtype(np.float16): (5, 10), np.dtype(ml_dtypes.bfloat16): (8, 7), np.dtype(np.float32): (8, 23)}


def wide(x):
    return jnp.asarray(x).astype(np.float64)


def rounded(x, dtype):
    """A float64 value rounded to `dtype`'s precision (to nearest even), still as float64. float64 itself
    has no wider type to compute in: its values pass unchanged, and its products may be fused."""
    if np.dtype(dtype) not in FORMATS:
        return x
    exponent_bits, mantissa_bits = FORMATS[np.dtype(dtype)]
    return lax.reduce_precision(x, exponent_bits=exponent_bits, mantissa_bits=mantissa_bits)


def multiply(x, y):
    """x * y rounded to its dtype, so that a following addition cannot fuse with it."""
    dtype = jnp.result_type(x, y)
    return rounded(wide(x) * wide(y), dtype).astype(dtype)


def divide(x, y):
    """x / y as one IEEE division. XLA's simplifier turns x / c and x / broadcast(y) into multiplications by
    a reciprocal, and x / (y / z) into x * z / y; the barrier hides a full-shaped divisor from it."""
    shape = jnp.broadcast_shapes(jnp.shape(x), jnp.shape(y))
    return x / lax.optimization_barrier(jnp.broadcast_to(y, shape))
