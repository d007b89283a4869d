"""Broadcasting: BroadcastTo and the shape arithmetic of BroadcastArgs and BroadcastGradientArgs."""
import jax.numpy as jnp
import numpy as np

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import InvalidArgument, broadcast_shape, check_rank
from xlacs_server.lower.registry import register_op


def shape_of(value, input: str) -> tuple[int, ...]:
    """A constant shape input: a vector of non-negative sizes."""
    check_rank(value, input, rank=1)
    if np.any(value < 0):
        raise InvalidArgument(f"input {input!r} {value.tolist()} holds a negative size", input=input)
    return tuple(value.tolist())


@register_op("BroadcastTo", dtypes=D.ALL, constant_inputs=("shape",))
def broadcast_to(ctx, input, shape, *, T, Tidx):
    shape = shape_of(shape, "shape")
    if broadcast_shape(np.shape(input), shape, inputs=("input", "shape")) != shape:
        raise InvalidArgument(f"input 'input' of shape {list(np.shape(input))} does not broadcast to shape "
                              f"{list(shape)}: each dimension must be 1 or the target's, rank at most "
                              f"{len(shape)}", input="shape")
    return [jnp.broadcast_to(input, shape)]


@register_op("BroadcastArgs", dtypes=D.INDEX, constant_inputs=("s0", "s1"))
def broadcast_args(ctx, s0, s1, *, T):
    return [np.array(broadcast_shape(shape_of(s0, "s0"), shape_of(s1, "s1"), inputs=("s0", "s1")), T)]


@register_op("BroadcastGradientArgs", dtypes=D.INDEX, constant_inputs=("s0", "s1"))
def broadcast_gradient_args(ctx, s0, s1, *, T):
    """The axes each input's gradient sums over: those where its (left-padded) shape is 1, unless the
    shapes are equal (TF then reduces nothing, even over dimensions of size 1)."""
    shapes = shape_of(s0, "s0"), shape_of(s1, "s1")
    broadcast_shape(*shapes, inputs=("s0", "s1"))
    if shapes[0] == shapes[1]:
        return [np.zeros(0, T), np.zeros(0, T)]
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + s for s in shapes]
    return [np.array([i for i, d in enumerate(p) if d == 1], T) for p in padded]
