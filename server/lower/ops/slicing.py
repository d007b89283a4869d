"""Slicing (and slice updates), splitting, joining, tiling, rolling, reversing and padding of tensors."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.errors import NotConstant
from xlacs_server.lower.context import is_constant
from xlacs_server.lower.ops.array import INT32, axes, scalar
from xlacs_server.lower.registry import register_op


def require_constant(ctx, value, name: str) -> np.ndarray:
    """For variadic inputs, which a registration's constant_inputs cannot name one by one."""
    if not is_constant(value):
        raise NotConstant(ctx.name, ctx.node.op, name)
    return value


def strided_index(begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask,
                  ctx=None):
    """StridedSlice's sparse spec as a Python index, whose clamping rules are TF's. A begin or end known only
    at run time (x[i] in a loop, say) may, as in tf2xla, only shrink a dimension to one element or take it
    whole, so that the shape stays static; `ctx` names the node when it does not."""
    static = is_constant(begin) and is_constant(end)
    index = []
    for i, s in enumerate(strides.tolist()):
        bit = 1 << i
        if ellipsis_mask & bit:
            index.append(Ellipsis)
        elif new_axis_mask & bit:
            index.append(None)
        elif shrink_axis_mask & bit:
            index.append(int(begin[i]) if static else begin[i])
        elif static:
            index.append(slice(None if begin_mask & bit else int(begin[i]), None if end_mask & bit else int(end[i]), s))
        elif begin_mask & end_mask & bit:
            index.append(slice(None, None, s))
        else:
            raise NotConstant(ctx.name, ctx.node.op, "begin")
    return tuple(index)


@register_op("StridedSlice", constant_inputs=("strides",))
def strided_slice(ctx, x, begin, end, strides, *, T, Index, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0):
    index = strided_index(begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask,
                          ctx)
    return [x[index] if is_constant(begin) and is_constant(end) else jnp.asarray(x)[index]]


def set_slice(base, index: tuple, value):
    """base with base[index] = value, where value has the shape StridedSlice gives (new axes included)."""
    # New axes have size 1 in value and no counterpart in base's shape: drop them from the index.
    index = tuple(i for i in index if i is not None)
    sliced = np.broadcast_to(np.zeros((), np.int8), base.shape)[index].shape
    return jnp.asarray(base).at[index].set(jnp.reshape(value, sliced))


@register_op("StridedSliceGrad", constant_inputs=("shape", "begin", "end", "strides"))
def strided_slice_grad(ctx, shape, begin, end, strides, dy, *, T, Index, begin_mask=0, end_mask=0,
                       ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0):
    index = strided_index(begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                          shrink_axis_mask)
    return [set_slice(jnp.zeros(axes(shape), dy.dtype), index, dy)]


@register_op("TensorStridedSliceUpdate", constant_inputs=("begin", "end", "strides"))
def tensor_strided_slice_update(ctx, input, begin, end, strides, value, *, T, Index, begin_mask=0, end_mask=0,
                                ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0):
    index = strided_index(begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                          shrink_axis_mask)
    return [set_slice(input, index, value)]


@register_op("Slice", constant_inputs=("size",))
def slice_(ctx, input, begin, size, *, T, Index):
    size = axes(size)
    if is_constant(begin):
        begin = axes(begin)
        limits = [dim if s == -1 else b + s for b, s, dim in zip(begin, size, input.shape)]
        if any(not 0 <= b <= limit <= dim for b, limit, dim in zip(begin, limits, input.shape)):
            raise ValueError(f"slice begin {list(begin)} size {list(size)} is out of bounds of "
                             f"shape {list(input.shape)}")
        return [lax.slice(input, begin, limits)]
    if any(s < 0 for s in size):
        raise ValueError(f"size {list(size)} has a -1, which needs a compile-time-constant begin")
    return [lax.dynamic_slice(input, list(jnp.asarray(begin)), size)]


def split_sizes(total: int, sizes: tuple[int, ...]) -> list[int]:
    """SplitV's sizes with the one -1 resolved."""
    unknown = [i for i, s in enumerate(sizes) if s == -1]
    if len(unknown) > 1:
        raise ValueError(f"size_splits {list(sizes)} may hold at most one -1")
    known = sum(s for s in sizes if s != -1)
    sizes = list(sizes)
    if unknown:
        sizes[unknown[0]] = total - known
    if sum(sizes) != total or any(s < 0 for s in sizes):
        raise ValueError(f"size_splits {list(sizes)} must sum to the split dimension's size {total}")
    return sizes


def split_at(value, sizes: list[int], axis: int) -> list:
    starts = np.cumsum([0] + sizes[:-1])
    return [lax.slice_in_dim(value, int(s), int(s) + n, axis=axis) for s, n in zip(starts, sizes)]


@register_op("Split", constant_inputs=("split_dim",))
def split(ctx, split_dim, value, *, num_split, T):
    axis = int(scalar(split_dim, "split_dim")) % value.ndim
    if value.shape[axis] % num_split:
        raise ValueError(f"dimension {axis} of size {value.shape[axis]} does not split into {num_split} parts")
    return split_at(value, [value.shape[axis] // num_split] * num_split, axis)


@register_op("SplitV", constant_inputs=("size_splits", "split_dim"))
def split_v(ctx, value, size_splits, split_dim, *, num_split, T, Tlen=np.dtype(np.int64)):
    axis = int(scalar(split_dim, "split_dim")) % value.ndim
    return split_at(value, split_sizes(value.shape[axis], axes(size_splits)), axis)


@register_op("Unpack")
def unpack(ctx, value, *, num, T, axis=0):
    return [lax.index_in_dim(value, i, axis % value.ndim, keepdims=False) for i in range(num)]


@register_op("Pack")
def pack(ctx, *values, N, T, axis=0):
    return [jnp.stack(values, axis=axis)]


@register_op("ConcatV2", constant_inputs=(-1,))
def concat_v2(ctx, *values_and_axis, N, T, Tidx=INT32):
    *values, axis = values_and_axis
    return [jnp.concatenate(values, axis=int(scalar(axis, "axis")))]


@register_op("Concat", constant_inputs=(0,))
def concat(ctx, concat_dim, *values, N, T):
    return [jnp.concatenate(values, axis=int(scalar(concat_dim, "concat_dim")))]


@register_op("ConcatOffset", type_attr="shape_type", constant_inputs=(0,))
def concat_offset(ctx, concat_dim, *shapes, N, shape_type=INT32):
    shapes = [require_constant(ctx, s, f"shape {i}") for i, s in enumerate(shapes)]
    axis = int(scalar(concat_dim, "concat_dim")) % len(shapes[0])
    offsets, at = [], 0
    for s in shapes:
        offset = np.zeros(len(s), shape_type)
        offset[axis] = at
        offsets.append(offset)
        at += int(s[axis])
    return offsets


@register_op("ParallelConcat")
def parallel_concat(ctx, *values, N, T, shape):
    return [jnp.concatenate(values, axis=0)]


# TF op -> the .at[] update it applies to the rows of x named by i
INPLACE = {"InplaceUpdate": "set", "InplaceAdd": "add", "InplaceSub": "subtract"}


def inplace(method: str, ctx, x, i, v, *, T):
    if method == "subtract":
        method, v = "add", -v
    return [getattr(jnp.asarray(x).at[i], method)(v)]


for _op, _method in INPLACE.items():
    register_op(_op)(functools.partial(inplace, _method))


@register_op("Roll", constant_inputs=("axis",))
def roll(ctx, input, shift, axis, *, T, Tshift, Taxis):
    """Rolls by a runtime or constant shift; shifts along a repeated axis add up, as in TF."""
    dims = [a % input.ndim for a in axes(axis)]
    shifts = jnp.broadcast_to(jnp.asarray(shift), (len(dims),))
    return [jnp.roll(input, tuple(shifts[k] for k in range(len(dims))), axis=tuple(dims))]


@register_op("Tile", constant_inputs=("multiples",))
def tile(ctx, input, multiples, *, T, Tmultiples=INT32):
    return [jnp.tile(input, axes(multiples))]


@register_op("Reverse", constant_inputs=("dims",))
def reverse(ctx, tensor, dims, *, T):
    return [lax.rev(tensor, tuple(i for i, flip in enumerate(np.atleast_1d(dims)) if flip))]


@register_op("ReverseV2", constant_inputs=("axis",))
def reverse_v2(ctx, tensor, axis, *, T, Tidx=INT32):
    return [lax.rev(tensor, tuple(sorted({a % tensor.ndim for a in axes(axis)})))]


@register_op("ReverseSequence")
def reverse_sequence(ctx, input, seq_lengths, *, seq_dim, T, batch_dim=0, Tlen=np.dtype(np.int64)):
    seq_dim, batch_dim = seq_dim % input.ndim, batch_dim % input.ndim
    index_shape = [1] * input.ndim
    index_shape[seq_dim] = input.shape[seq_dim]
    position = lax.broadcasted_iota(seq_lengths.dtype, index_shape, seq_dim)
    length_shape = [1] * input.ndim
    length_shape[batch_dim] = input.shape[batch_dim]
    lengths = jnp.reshape(seq_lengths, length_shape)
    source = jnp.where(position < lengths, lengths - 1 - position, position)
    return [jnp.take_along_axis(input, jnp.broadcast_to(source, input.shape), axis=seq_dim)]


def paddings_of(paddings) -> list[tuple[int, int]]:
    return [(int(lo), int(hi)) for lo, hi in np.reshape(paddings, (-1, 2))]


def pad_constant(x, paddings, value):
    return lax.pad(x, jnp.asarray(value, x.dtype).reshape(()), [(lo, hi, 0) for lo, hi in paddings_of(paddings)])


@register_op("Pad", constant_inputs=("paddings",))
def pad(ctx, input, paddings, *, T, Tpaddings=INT32):
    return [pad_constant(input, paddings, 0)]


@register_op("PadV2", constant_inputs=("paddings",))
def pad_v2(ctx, input, paddings, constant_values, *, T, Tpaddings=INT32):
    return [pad_constant(input, paddings, constant_values)]


MIRROR_MODES = {"REFLECT": "reflect", "SYMMETRIC": "symmetric"}


def mirror_mode(mode: str) -> str:
    if mode not in MIRROR_MODES:
        raise ValueError(f"mode {mode!r} is not one of {sorted(MIRROR_MODES)}")
    return MIRROR_MODES[mode]


@register_op("MirrorPad", constant_inputs=("paddings",))
def mirror_pad(ctx, input, paddings, *, T, mode, Tpaddings=INT32):
    return [jnp.pad(input, paddings_of(paddings), mode=mirror_mode(mode))]


@register_op("MirrorPadGrad", constant_inputs=("paddings",))
def mirror_pad_grad(ctx, input, paddings, *, T, mode, Tpaddings=INT32):
    pads, how = paddings_of(paddings), mirror_mode(mode)
    shape = [dim - lo - hi for dim, (lo, hi) in zip(input.shape, pads)]
    padded = jax.linear_transpose(lambda x: jnp.pad(x, pads, mode=how), jax.ShapeDtypeStruct(shape, input.dtype))
    return list(padded(input))
