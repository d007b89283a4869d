"""Arithmetic that rounds as TF's kernels do where XLA's algebraic simplifier would round differently."""
import jax.numpy as jnp
from jax import lax


def divide(x, y):
    """x / y as one IEEE division. XLA's simplifier turns x / c and x / broadcast(y) into multiplications by
    a reciprocal, and x / (y / z) into x * z / y; where a result is then floored or rounded (quantization,
    sampling positions) the last bit moves it to a neighbouring step. The barrier hides a full-shaped divisor."""
    shape = jnp.broadcast_shapes(jnp.shape(x), jnp.shape(y))
    return x / lax.optimization_barrier(jnp.broadcast_to(y, shape))
