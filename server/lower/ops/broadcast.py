"""Broadcasting: BroadcastTo and the shape arithmetic of BroadcastArgs and BroadcastGradientArgs."""
import jax.numpy as jnp
import numpy as np

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.ops.array import INT32, axes
from xlacs_server.lower.registry import register_op


@register_op("BroadcastTo", dtypes=D.ALL, constant_inputs=("shape",))
def broadcast_to(ctx, input, shape, *, T, Tidx=INT32):
    return [jnp.broadcast_to(input, axes(shape))]


@register_op("BroadcastArgs", dtypes=D.INDEX, constant_inputs=("s0", "s1"))
def broadcast_args(ctx, s0, s1, *, T=INT32):
    return [np.array(np.broadcast_shapes(axes(s0), axes(s1)), T)]


@register_op("BroadcastGradientArgs", dtypes=D.INDEX, constant_inputs=("s0", "s1"))
def broadcast_gradient_args(ctx, s0, s1, *, T=INT32):
    """The axes each input's gradient sums over: those where its (left-padded) shape is 1, unless the
    shapes are equal (TF then reduces nothing, even over dimensions of size 1)."""
    np.broadcast_shapes(axes(s0), axes(s1))  # raises for incompatible shapes
    if axes(s0) == axes(s1):
        return [np.zeros(0, T), np.zeros(0, T)]
    rank = max(s0.size, s1.size)
    padded = [(1,) * (rank - s.size) + axes(s) for s in (s0, s1)]
    return [np.array([i for i, d in enumerate(p) if d == 1], T) for p in padded]
