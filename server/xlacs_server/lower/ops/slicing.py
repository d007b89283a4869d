"""Slicing (and slice updates), splitting, joining, tiling, rolling, reversing and padding of tensors."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.errors import NotConstant
from xlacs_server.lower.checks import InvalidArgument, check_axes, check_axis_attr, check_rank, check_scalar
from xlacs_server.lower.context import is_constant
from xlacs_server.lower.ops.array import axes, scalar
from xlacs_server.lower.registry import register_op


def require_constant(ctx, value, name: str) -> np.ndarray:
    """For variadic inputs, which a registration's constant_inputs cannot name one by one."""
    if not is_constant(value):
        raise NotConstant(ctx.name, ctx.node.op, name)
    return value


def check_strided_spec(shape, begin, end, strides, ellipsis_mask: int, new_axis_mask: int,
                       shrink_axis_mask: int, input: str = "input") -> None:
    """What TF's ValidateStridedSliceOp refuses: begin, end and strides of different lengths, a zero stride,
    two ellipses, more indexed dimensions than `input` has, a shrunk dimension indexed out of its bounds."""
    for name, value in (("begin", begin), ("end", end), ("strides", strides)):
        if np.ndim(value) != 1 or np.shape(value) != np.shape(strides):
            raise InvalidArgument(f"inputs 'begin', 'end' and 'strides' must be vectors of one length, but have "
                                  f"shapes {list(np.shape(begin))}, {list(np.shape(end))} and "
                                  f"{list(np.shape(strides))}", input=name)
    if not np.all(strides):
        raise InvalidArgument(f"input 'strides' {strides.tolist()} holds a 0: strides must be non-zero",
                              input="strides")
    ellipses = [i for i in range(len(strides)) if ellipsis_mask >> i & 1]
    if len(ellipses) > 1:
        raise InvalidArgument(f"ellipsis_mask {ellipsis_mask} marks {len(ellipses)} ellipses; a slice has at most "
                              "one", attr="ellipsis_mask")
    indexing = [i for i in range(len(strides)) if not (ellipsis_mask | new_axis_mask) >> i & 1]
    if len(indexing) > len(shape):
        raise InvalidArgument(f"the slice indexes {len(indexing)} dimensions, but input {input!r} has shape "
                              f"{list(shape)}: give at most {len(shape)} begin, end and strides values besides "
                              "new axes and the ellipsis", input="begin")
    if not is_constant(begin):
        return
    # The dimension of `input` each entry indexes: the ellipsis stands for the dimensions no entry names.
    skipped = len(shape) - len(indexing)
    for i in indexing:
        dim = sum(1 for j in indexing if j < i) + (skipped if ellipses and ellipses[0] < i else 0)
        if shrink_axis_mask >> i & 1 and not -shape[dim] <= begin[i] < shape[dim]:
            raise InvalidArgument(f"begin[{i}] = {int(begin[i])} takes one element of dimension {dim} of input "
                                  f"{input!r}, of size {shape[dim]}: it must be in [{-shape[dim]}, {shape[dim]})",
                                  input="begin")


def strided_index(shape, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask,
                  ctx=None, input: str = "input"):
    """StridedSlice's sparse spec on a tensor of `shape` (named `input` in messages) as a Python index, whose
    clamping rules are TF's. A begin or end known only at run time (x[i] in a loop, say) may, as in tf2xla,
    only shrink a dimension to one element or take it whole, so that the shape stays static; `ctx` names the
    node when it does not."""
    check_strided_spec(shape, begin, end, strides, ellipsis_mask, new_axis_mask, shrink_axis_mask, input)
    index = []
    for i, s in enumerate(strides.tolist()):
        bit = 1 << i
        if ellipsis_mask & bit:
            index.append(Ellipsis)
        elif new_axis_mask & bit:
            index.append(None)
        elif shrink_axis_mask & bit:
            index.append(int(begin[i]) if is_constant(begin) else begin[i])
        else:
            begin_known, end_known = begin_mask & bit or is_constant(begin), end_mask & bit or is_constant(end)
            if not (begin_known and end_known):  # the slice's length would depend on a run-time value
                raise NotConstant(ctx.name, ctx.node.op, "end" if begin_known else "begin")
            index.append(slice(None if begin_mask & bit else int(begin[i]), None if end_mask & bit else int(end[i]), s))
    return tuple(index)


def sliced_shape(shape, index: tuple) -> tuple[int, ...]:
    """The shape of a tensor of `shape` indexed by a strided_index."""
    return np.broadcast_to(np.zeros((), np.int8), shape)[index].shape


def check_sliced(value, shape, index: tuple, input: str) -> None:
    """An update or gradient `input` has the shape that StridedSlice gives, as TF's kernels require."""
    want = sliced_shape(shape, index)
    if np.shape(value) != want:
        raise InvalidArgument(f"input {input!r} has shape {list(np.shape(value))}, but the slice it stands for has "
                              f"shape {list(want)}", input=input)


@register_op("StridedSlice", constant_inputs=("strides",))
def strided_slice(ctx, x, begin, end, strides, *, T, Index, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                  shrink_axis_mask):
    index = strided_index(np.shape(x), begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                          shrink_axis_mask, ctx)
    return [x[index] if is_constant(begin) else jnp.asarray(x)[index]]


def set_slice(base, index: tuple, value):
    """base with base[index] = value, where value has the shape StridedSlice gives (new axes included)."""
    # New axes have size 1 in value and no counterpart in base's shape: drop them from the index.
    index = tuple(i for i in index if i is not None)
    return jnp.asarray(base).at[index].set(jnp.reshape(value, sliced_shape(base.shape, index)))


@register_op("StridedSliceGrad", constant_inputs=("shape", "begin", "end", "strides"))
def strided_slice_grad(ctx, shape, begin, end, strides, dy, *, T, Index, begin_mask, end_mask, ellipsis_mask,
                       new_axis_mask, shrink_axis_mask):
    check_rank(shape, "shape", rank=1)
    shape = axes(shape)
    index = strided_index(shape, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                          shrink_axis_mask, input="shape")
    check_sliced(dy, shape, index, "dy")
    return [set_slice(jnp.zeros(shape, dy.dtype), index, dy)]


@register_op("TensorStridedSliceUpdate", constant_inputs=("begin", "end", "strides"))
def tensor_strided_slice_update(ctx, input, begin, end, strides, value, *, T, Index, begin_mask, end_mask,
                                ellipsis_mask, new_axis_mask, shrink_axis_mask):
    index = strided_index(input.shape, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                          shrink_axis_mask)
    check_sliced(value, input.shape, index, "value")
    return [set_slice(input, index, value)]


def check_vector(value, input: str, length: int, of: str) -> None:
    """`input` is a vector with one value per dimension of `of`."""
    if np.shape(value) != (length,):
        raise InvalidArgument(f"input {input!r} must be a vector of {length} value(s), one per dimension of {of}, "
                              f"but has shape {list(np.shape(value))}", input=input)


@register_op("Slice", constant_inputs=("size",))
def slice_(ctx, input, begin, size, *, T, Index):
    for name, value in (("begin", begin), ("size", size)):
        check_vector(value, name, input.ndim, "input 'input'")
    size = axes(size)
    if is_constant(begin):
        begin = axes(begin)
        for k, (b, s, dim) in enumerate(zip(begin, size, input.shape)):
            if not 0 <= b <= dim:
                raise InvalidArgument(f"begin[{k}] = {b} is out of bounds of dimension {k} of input 'input', of "
                                      f"size {dim}: use a value in [0, {dim}]", input="begin")
            if not (s == -1 or 0 <= s <= dim - b):
                raise InvalidArgument(f"size[{k}] = {s} does not fit dimension {k} of input 'input' (size {dim}) "
                                      f"from begin {b}: use -1 (the rest) or a value in [0, {dim - b}]",
                                      input="size")
        return [lax.slice(input, begin, [dim if s == -1 else b + s for b, s, dim in zip(begin, size, input.shape)])]
    for k, (s, dim) in enumerate(zip(size, input.shape)):
        if s == -1:  # the rest of the dimension: its length would depend on the run-time begin
            raise NotConstant(ctx.name, ctx.node.op, "begin")
        if not 0 <= s <= dim:
            raise InvalidArgument(f"size[{k}] = {s} does not fit dimension {k} of input 'input', of size {dim}",
                                  input="size")
    return [lax.dynamic_slice(input, list(jnp.asarray(begin)), size)]


def split_sizes(total: int, sizes: tuple[int, ...]) -> list[int]:
    """SplitV's sizes with the one -1 resolved."""
    unknown = [i for i, s in enumerate(sizes) if s == -1]
    if len(unknown) > 1:
        raise InvalidArgument(f"input 'size_splits' {list(sizes)} holds more than one -1: at most one size may be "
                              "inferred", input="size_splits")
    known = sum(s for s in sizes if s != -1)
    sizes = list(sizes)
    if unknown:
        sizes[unknown[0]] = total - known
    if sum(sizes) != total or any(s < 0 for s in sizes):
        raise InvalidArgument(f"input 'size_splits' {list(sizes)} must be non-negative sizes that sum to "
                              f"{total}, the size of the split dimension", input="size_splits")
    return sizes


def split_at(value, sizes: list[int], axis: int) -> list:
    starts = np.cumsum([0] + sizes[:-1])
    return [lax.slice_in_dim(value, int(s), int(s) + n, axis=axis) for s, n in zip(starts, sizes)]


def split_axis(split_dim, value) -> int:
    return check_axes(scalar(split_dim, "split_dim"), np.ndim(value), "split_dim")[0]


@register_op("Split", constant_inputs=("split_dim",))
def split(ctx, split_dim, value, *, num_split, T):
    axis = split_axis(split_dim, value)
    if value.shape[axis] % num_split:
        raise InvalidArgument(f"num_split {num_split} does not divide dimension {axis} of input 'value' (shape "
                              f"{list(value.shape)}): use a divisor of {value.shape[axis]}, or SplitV",
                              attr="num_split")
    return split_at(value, [value.shape[axis] // num_split] * num_split, axis)


@register_op("SplitV", constant_inputs=("size_splits", "split_dim"))
def split_v(ctx, value, size_splits, split_dim, *, num_split, T, Tlen):
    axis = split_axis(split_dim, value)
    if np.shape(size_splits) != (num_split,):
        raise InvalidArgument(f"input 'size_splits' must be a vector of num_split={num_split} sizes, but has shape "
                              f"{list(np.shape(size_splits))}", input="size_splits")
    return split_at(value, split_sizes(value.shape[axis], axes(size_splits)), axis)


@register_op("Unpack")
def unpack(ctx, value, *, num, T, axis):
    axis = check_axis_attr(axis, np.ndim(value), "axis")
    if value.shape[axis] != num:
        raise InvalidArgument(f"input 'value' has shape {list(value.shape)}: dimension {axis} must have num={num} "
                              "elements", attr="num")
    return [lax.index_in_dim(value, i, axis, keepdims=False) for i in range(num)]


def check_same_shapes(values, input: str = "values") -> None:
    for k, value in enumerate(values):
        if np.shape(value) != np.shape(values[0]):
            raise InvalidArgument(f"{input}[{k}] has shape {list(np.shape(value))}, {input}[0] "
                                  f"{list(np.shape(values[0]))}: they must have one shape", input=f"{input}[{k}]")


@register_op("Pack")
def pack(ctx, *values, N, T, axis):
    check_same_shapes(values)
    return [jnp.stack(values, axis=check_axis_attr(axis, np.ndim(values[0]) + 1, "axis"))]


def concat_axis(axis, shapes: list[tuple], input: str, values: str = "values") -> int:
    """The axis (input `input`) of a concatenation of `shapes` (inputs `values`), checked with them as TF's
    ConcatOp does."""
    first = shapes[0]
    if not first:
        raise InvalidArgument(f"{values}[0] is a scalar; scalars do not concatenate: use Pack", input=f"{values}[0]")
    axis = check_axes(scalar(axis, input), len(first), input)[0]
    for k, shape in enumerate(shapes):
        if len(shape) != len(first) or any(a != b for d, (a, b) in enumerate(zip(shape, first)) if d != axis):
            raise InvalidArgument(f"{values}[{k}] has shape {list(shape)}, {values}[0] {list(first)}: they must "
                                  f"agree in every dimension but the concatenated one ({axis})",
                                  input=f"{values}[{k}]")
    return axis


@register_op("ConcatV2", constant_inputs=(-1,))
def concat_v2(ctx, *values_and_axis, N, T, Tidx):
    *values, axis = values_and_axis
    return [jnp.concatenate(values, axis=concat_axis(axis, [np.shape(v) for v in values], "axis"))]


@register_op("Concat", constant_inputs=(0,))
def concat(ctx, concat_dim, *values, N, T):
    return [jnp.concatenate(values, axis=concat_axis(concat_dim, [np.shape(v) for v in values], "concat_dim"))]


@register_op("ConcatOffset", type_attr="shape_type", constant_inputs=(0,))
def concat_offset(ctx, concat_dim, *shapes, N, shape_type):
    for i, s in enumerate(shapes):
        require_constant(ctx, s, f"shape[{i}]")
        check_rank(s, f"shape[{i}]", rank=1)
    axis = concat_axis(concat_dim, [tuple(s.tolist()) for s in shapes], "concat_dim", values="shape")
    offsets, at = [], 0
    for s in shapes:
        offset = np.zeros(len(s), shape_type)
        offset[axis] = at
        offsets.append(offset)
        at += int(s[axis])
    return offsets


@register_op("ParallelConcat")
def parallel_concat(ctx, *values, N, T, shape):
    check_same_shapes(values)
    return [jnp.concatenate(values, axis=0)]


# TF op -> the .at[] update it applies to the rows of x named by i
INPLACE = {"InplaceUpdate": "set", "InplaceAdd": "add", "InplaceSub": "subtract"}


def inplace(method: str, ctx, x, i, v, *, T):
    check_rank(i, "i", rank=1)
    want = np.shape(i) + np.shape(x)[1:]
    if np.shape(v) != want:
        raise InvalidArgument(f"input 'v' has shape {list(np.shape(v))}; rows {list(np.shape(i))} of input 'x' "
                              f"{list(np.shape(x))} need {list(want)}", input="v")
    if method == "subtract":
        method, v = "add", -v
    return [getattr(jnp.asarray(x).at[i], method)(v)]


for _op, _method in INPLACE.items():
    register_op(_op)(functools.partial(inplace, _method))


@register_op("Roll", constant_inputs=("axis",))
def roll(ctx, input, shift, axis, *, T, Tshift, Taxis):
    """Rolls by a runtime or constant shift."""
    if np.ndim(shift) > 1 or np.shape(shift) != np.shape(axis):
        raise InvalidArgument(f"inputs 'shift' and 'axis' must be scalars or vectors of one length, but have "
                              f"shapes {list(np.shape(shift))} and {list(np.shape(axis))}", input="shift")
    dims = check_axes(axis, input.ndim, unique=False)  # shifts along a repeated axis add up
    shifts = jnp.broadcast_to(jnp.asarray(shift), (len(dims),))
    return [jnp.roll(input, tuple(shifts[k] for k in range(len(dims))), axis=dims)]


@register_op("Tile", constant_inputs=("multiples",))
def tile(ctx, input, multiples, *, T, Tmultiples):
    check_vector(multiples, "multiples", np.ndim(input), "input 'input'")
    if np.any(multiples < 0):
        raise InvalidArgument(f"input 'multiples' {multiples.tolist()} holds a negative value", input="multiples")
    return [jnp.tile(input, axes(multiples))]


@register_op("Reverse", constant_inputs=("dims",))
def reverse(ctx, tensor, dims, *, T):
    check_vector(dims, "dims", np.ndim(tensor), "input 'tensor'")
    return [lax.rev(tensor, tuple(i for i, flip in enumerate(dims) if flip))]


@register_op("ReverseV2", constant_inputs=("axis",))
def reverse_v2(ctx, tensor, axis, *, T, Tidx):
    check_rank(axis, "axis", rank=1)
    return [lax.rev(tensor, tuple(sorted(check_axes(axis, np.ndim(tensor)))))]


@register_op("ReverseSequence")
def reverse_sequence(ctx, input, seq_lengths, *, seq_dim, T, batch_dim, Tlen):
    seq_dim, batch_dim = check_axis_attr(seq_dim, input.ndim, "seq_dim"), check_axis_attr(batch_dim, input.ndim,
                                                                                          "batch_dim")
    if seq_dim == batch_dim:
        raise InvalidArgument(f"seq_dim and batch_dim are both {seq_dim}: they must differ", attr="seq_dim")
    check_vector(seq_lengths, "seq_lengths", input.shape[batch_dim], f"batch dimension {batch_dim} of input 'input'")
    index_shape = [1] * input.ndim
    index_shape[seq_dim] = input.shape[seq_dim]
    position = lax.broadcasted_iota(seq_lengths.dtype, index_shape, seq_dim)
    length_shape = [1] * input.ndim
    length_shape[batch_dim] = input.shape[batch_dim]
    lengths = jnp.reshape(seq_lengths, length_shape)
    source = jnp.where(position < lengths, lengths - 1 - position, position)
    return [jnp.take_along_axis(input, jnp.broadcast_to(source, input.shape), axis=seq_dim)]


def paddings_of(paddings, rank: int, input: str = "paddings") -> list[tuple[int, int]]:
    """A constant [rank, 2] paddings (or crops) input as (before, after) pairs, each non-negative."""
    if np.shape(paddings) != (rank, 2):
        raise InvalidArgument(f"input {input!r} must have shape [{rank}, 2], one (before, after) pair per "
                              f"dimension, but has shape {list(np.shape(paddings))}", input=input)
    if np.any(paddings < 0):
        raise InvalidArgument(f"input {input!r} {paddings.tolist()} holds a negative value", input=input)
    return [(int(lo), int(hi)) for lo, hi in paddings]


def pad_constant(x, paddings, value):
    return lax.pad(x, jnp.asarray(value, x.dtype).reshape(()),
                   [(lo, hi, 0) for lo, hi in paddings_of(paddings, np.ndim(x))])


@register_op("Pad", constant_inputs=("paddings",))
def pad(ctx, input, paddings, *, T, Tpaddings):
    return [pad_constant(input, paddings, 0)]


@register_op("PadV2", constant_inputs=("paddings",))
def pad_v2(ctx, input, paddings, constant_values, *, T, Tpaddings):
    check_scalar(constant_values, "constant_values")
    return [pad_constant(input, paddings, constant_values)]


MIRROR_MODES = {"REFLECT": "reflect", "SYMMETRIC": "symmetric"}


def mirror_paddings(shape, paddings, mode: str) -> tuple[list[tuple[int, int]], str]:
    """MirrorPad's pairs and numpy mode: a reflection repeats no edge, so it pads less than the dimension."""
    if mode not in MIRROR_MODES:
        raise InvalidArgument(f"mode {mode!r} is not one of {sorted(MIRROR_MODES)}", attr="mode")
    pads = paddings_of(paddings, len(shape))
    room = 0 if mode == "SYMMETRIC" else 1
    for k, ((lo, hi), dim) in enumerate(zip(pads, shape)):
        if max(lo, hi) > dim - room:
            raise InvalidArgument(f"paddings[{k}] = {[lo, hi]}: {mode} padding of dimension {k} (size {dim}) must "
                                  f"not exceed {dim - room}", input="paddings")
    return pads, MIRROR_MODES[mode]


@register_op("MirrorPad", constant_inputs=("paddings",))
def mirror_pad(ctx, input, paddings, *, T, mode, Tpaddings):
    pads, how = mirror_paddings(np.shape(input), paddings, mode)
    return [jnp.pad(input, pads, mode=how)]


@register_op("MirrorPadGrad", constant_inputs=("paddings",))
def mirror_pad_grad(ctx, input, paddings, *, T, mode, Tpaddings):
    pads = paddings_of(paddings, np.ndim(input))
    shape = [dim - lo - hi for dim, (lo, hi) in zip(input.shape, pads)]
    if min(shape, default=1) < 0:
        raise InvalidArgument(f"input 'paddings' {paddings.tolist()} pads more than input 'input' "
                              f"{list(input.shape)} holds", input="paddings")
    pads, how = mirror_paddings(shape, paddings, mode)
    padded = jax.linear_transpose(lambda x: jnp.pad(x, pads, mode=how), jax.ShapeDtypeStruct(shape, input.dtype))
    return list(padded(input))
