"""Graph plumbing and array manipulation: placeholders, constants, shapes, slicing, joining."""
import jax.numpy as jnp
import numpy as np

from xlacs_server.errors import InvalidRequest
from xlacs_server.lower import dtypes as D
from xlacs_server.lower.registry import register_op


def axes(value) -> tuple[int, ...]:
    """A constant axis or list of axes as a tuple of ints."""
    return tuple(int(a) for a in np.atleast_1d(value))


@register_op("Placeholder", type_attr="dtype", foldable=False)
def placeholder(ctx, *, dtype, shape=None):
    raise InvalidRequest(f"placeholder {ctx.name!r} is not fed: add it to the feeds with its dtype and shape")


@register_op("PlaceholderWithDefault", type_attr="dtype")
def placeholder_with_default(ctx, default, *, dtype, shape):
    return [default]


@register_op("Const", type_attr="dtype", dtypes=D.ALL)
def const(ctx, *, value, dtype):
    return [value]


@register_op("Identity", "Snapshot", "StopGradient", "PreventGradient")
def identity(ctx, x, *, T, message=""):
    return [x]


@register_op("IdentityN")
def identity_n(ctx, *xs, T):
    return list(xs)


@register_op("NoOp")
def no_op(ctx):
    return []


@register_op("Shape", type_attr="out_type")
def shape(ctx, x, *, T, out_type=np.dtype(np.int32)):
    return [np.array(x.shape, dtype=out_type)]


@register_op("Reshape", constant_inputs=("shape",))
def reshape(ctx, tensor, shape, *, T, Tshape=np.dtype(np.int32)):
    return [jnp.reshape(tensor, axes(shape) if shape.ndim else ())]


@register_op("Transpose", constant_inputs=("perm",))
def transpose(ctx, x, perm, *, T, Tperm=np.dtype(np.int32)):
    return [jnp.transpose(x, axes(perm))]


@register_op("ConcatV2", constant_inputs=(-1,))
def concat_v2(ctx, *values_and_axis, N, T, Tidx=np.dtype(np.int32)):
    *values, axis = values_and_axis
    return [jnp.concatenate(values, axis=int(axis))]


@register_op("Pack")
def pack(ctx, *values, N, T, axis=0):
    return [jnp.stack(values, axis=axis)]


@register_op("Squeeze")
def squeeze(ctx, x, *, T, squeeze_dims=()):
    return [jnp.squeeze(x, axis=tuple(squeeze_dims) or None)]


@register_op("ExpandDims", constant_inputs=("dim",))
def expand_dims(ctx, x, dim, *, T, Tdim=np.dtype(np.int32)):
    return [jnp.expand_dims(x, int(dim.reshape(-1)[0]))]


@register_op("Cast", type_attr="DstT")
def cast(ctx, x, *, SrcT, DstT, Truncate=False):
    return [jnp.asarray(x).astype(DstT)]


@register_op("StridedSlice", constant_inputs=("begin", "end", "strides"))
def strided_slice(ctx, x, begin, end, strides, *, T, Index, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0):
    index = []
    for i, (b, e, s) in enumerate(zip(begin.tolist(), end.tolist(), strides.tolist())):
        bit = 1 << i
        if ellipsis_mask & bit:
            index.append(Ellipsis)
        elif new_axis_mask & bit:
            index.append(None)
        elif shrink_axis_mask & bit:
            index.append(b)
        else:
            index.append(slice(None if begin_mask & bit else b, None if end_mask & bit else e, s))
    return [x[tuple(index)]]


def _pad(x, paddings, constant_values=0):
    return jnp.pad(x, [tuple(p) for p in paddings.tolist()], constant_values=constant_values)


@register_op("Pad", constant_inputs=("paddings",))
def pad(ctx, x, paddings, *, T, Tpaddings=np.dtype(np.int32)):
    return [_pad(x, paddings)]


@register_op("PadV2", constant_inputs=("paddings",))
def pad_v2(ctx, x, paddings, constant_values, *, T, Tpaddings=np.dtype(np.int32)):
    return [_pad(x, paddings, constant_values)]
