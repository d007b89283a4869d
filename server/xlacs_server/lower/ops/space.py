"""Rearrangements between space, batch and depth, patch extraction, and data-format permutations."""
import itertools

import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower.checks import InvalidArgument, Unimplemented, check_rank
from xlacs_server.lower.dtypes import INDEX
from xlacs_server.lower.ops.array import axes
from xlacs_server.lower.ops.slicing import paddings_of
from xlacs_server.lower.registry import register_op


def check_block(block_shape, input) -> tuple[int, ...]:
    """The block_shape vector: positive sizes, one per spatial dimension of `input` (after the batch)."""
    check_rank(block_shape, "block_shape", rank=1)
    block = axes(block_shape) if block_shape.size else ()
    if any(b < 1 for b in block):
        raise InvalidArgument(f"input 'block_shape' {list(block)} must hold positive sizes", input="block_shape")
    if np.ndim(input) < 1 + len(block):
        raise InvalidArgument(f"input 'input' has shape {list(np.shape(input))}; block_shape {list(block)} needs "
                              f"a batch dimension and {len(block)} spatial one(s)", input="input")
    return block


def space_to_batch_nd(x, block: tuple[int, ...], paddings):
    m = len(block)
    pads = paddings_of(paddings, m)
    padding = [(0, 0, 0)] + [(lo, hi, 0) for lo, hi in pads] + [(0, 0, 0)] * (x.ndim - 1 - m)
    x = lax.pad(x, jnp.zeros((), x.dtype), padding)
    batch, spatial, rest = x.shape[0], x.shape[1:1 + m], x.shape[1 + m:]
    if any(d % b for d, b in zip(spatial, block)):
        raise InvalidArgument(f"input 'input' padded by input 'paddings' has the spatial shape {list(spatial)}, "
                              f"which block_shape {list(block)} does not divide: pad to a multiple of the block",
                              input="paddings")
    split = [batch] + [n for d, b in zip(spatial, block) for n in (d // b, b)] + list(rest)
    # [batch, d1, b1, ..., dM, bM, rest] -> [b1, ..., bM, batch, d1, ..., dM, rest]
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + list(range(1 + 2 * m, len(split)))
    out = jnp.transpose(jnp.reshape(x, split), perm)
    return jnp.reshape(out, [batch * int(np.prod(block))] + [d // b for d, b in zip(spatial, block)] + list(rest))


def batch_to_space_nd(x, block: tuple[int, ...], crops):
    m = len(block)
    batch, spatial, rest = x.shape[0], x.shape[1:1 + m], x.shape[1 + m:]
    count = int(np.prod(block))
    if batch % count:
        raise InvalidArgument(f"input 'input' has shape {list(x.shape)}: its batch {batch} is not divisible by "
                              f"the product of the block sizes {list(block)} ({count})", input="input")
    pads = paddings_of(crops, m, "crops")
    for k, ((lo, hi), d, b) in enumerate(zip(pads, spatial, block)):
        if lo + hi > d * b:
            raise InvalidArgument(f"crops[{k}] = {[lo, hi]} crops more than the {d * b} elements of spatial "
                                  f"dimension {k}", input="crops")
    x = jnp.reshape(x, list(block) + [batch // count] + list(spatial) + list(rest))
    # [b1, ..., bM, batch, d1, ..., dM, rest] -> [batch, d1, b1, ..., dM, bM, rest]
    perm = [m] + [n for i in range(m) for n in (m + 1 + i, i)] + list(range(2 * m + 1, x.ndim))
    x = jnp.reshape(jnp.transpose(x, perm), [batch // count] + [d * b for d, b in zip(spatial, block)] + list(rest))
    limits = [(0, x.shape[0])] + [(lo, x.shape[1 + i] - hi) for i, (lo, hi) in enumerate(pads)]
    return lax.slice(x, [lo for lo, _ in limits] + [0] * len(rest), [hi for _, hi in limits] + list(rest))


@register_op("SpaceToBatchND", constant_inputs=("block_shape", "paddings"))
def space_to_batch_nd_op(ctx, input, block_shape, paddings, *, T, Tblock_shape, Tpaddings):
    return [space_to_batch_nd(input, check_block(block_shape, input), paddings)]


@register_op("SpaceToBatch", constant_inputs=("paddings",))
def space_to_batch(ctx, input, paddings, *, T, block_size, Tpaddings):
    check_rank(input, "input", rank=4)
    return [space_to_batch_nd(input, (block_size, block_size), paddings)]


@register_op("BatchToSpaceND", constant_inputs=("block_shape", "crops"))
def batch_to_space_nd_op(ctx, input, block_shape, crops, *, T, Tblock_shape, Tcrops):
    return [batch_to_space_nd(input, check_block(block_shape, input), crops)]


@register_op("BatchToSpace", constant_inputs=("crops",))
def batch_to_space(ctx, input, crops, *, T, block_size, Tidx):
    check_rank(input, "input", rank=4)
    return [batch_to_space_nd(input, (block_size, block_size), crops)]


def channels_last(fn, x, data_format: str):
    """fn of an NHWC tensor, applied to x in data_format."""
    if data_format == "NCHW_VECT_C":
        return vect_c(fn, x)
    if data_format not in ("NHWC", "NCHW"):
        raise InvalidArgument(f"data_format {data_format!r} is not one of NHWC, NCHW, NCHW_VECT_C",
                              attr="data_format")
    check_rank(x, "input", rank=4)
    if data_format == "NHWC":
        return fn(x)
    return jnp.transpose(fn(jnp.transpose(x, (0, 2, 3, 1))), (0, 3, 1, 2))


def vect_c(fn, x):
    """fn of an NHWC tensor, applied to x in NCHW_VECT_C: [N, C/4, H, W, 4], channel c at [c // 4, c % 4] (cuDNN's
    layout of int8). TF's CPU kernels do not run it; tf2xla lowers it for any type, as here."""
    check_rank(x, "input", rank=5)
    n, blocks, h, w, vector = x.shape
    if vector != 4:
        raise InvalidArgument(f"input 'input' has shape {list(x.shape)}; NCHW_VECT_C packs channels by 4 in its last "
                              "dimension", input="input")
    out = fn(jnp.reshape(jnp.transpose(x, (0, 2, 3, 1, 4)), (n, h, w, 4 * blocks)))
    n, h, w, c = out.shape
    if c % 4:
        raise InvalidArgument(f"the output has {c} channels, which NCHW_VECT_C cannot pack by 4: choose a block_size "
                              "that leaves a multiple of 4", attr="block_size")
    return jnp.transpose(jnp.reshape(out, (n, h, w, c // 4, 4)), (0, 3, 1, 2, 4))


def space_to_depth_nhwc(x, b: int):
    n, h, w, c = x.shape
    if h % b or w % b:
        raise InvalidArgument(f"input 'input' has height {h} and width {w}, which block_size {b} must divide",
                              attr="block_size")
    x = jnp.transpose(jnp.reshape(x, (n, h // b, b, w // b, b, c)), (0, 1, 3, 2, 4, 5))
    return jnp.reshape(x, (n, h // b, w // b, b * b * c))


def depth_to_space_nhwc(x, b: int):
    n, h, w, c = x.shape
    if c % (b * b):
        raise InvalidArgument(f"input 'input' has depth {c}, which the square of block_size {b} ({b * b}) must "
                              "divide", attr="block_size")
    x = jnp.transpose(jnp.reshape(x, (n, h, w, b, b, c // (b * b))), (0, 1, 3, 2, 4, 5))
    return jnp.reshape(x, (n, h * b, w * b, c // (b * b)))


@register_op("SpaceToDepth")
def space_to_depth(ctx, input, *, T, block_size, data_format):
    return [channels_last(lambda x: space_to_depth_nhwc(x, block_size), input, data_format)]


@register_op("DepthToSpace")
def depth_to_space(ctx, input, *, T, block_size, data_format):
    return [channels_last(lambda x: depth_to_space_nhwc(x, block_size), input, data_format)]


def extract_patches(x, ksizes, strides, rates, padding: str, input: str, rank: int):
    """Patches of the spatial dims of a channels-last x of `rank` (input `input`), flattened into depth in
    (kernel..., channel) order."""
    check_rank(x, input, rank=rank)
    for attr, values in (("ksizes", ksizes), ("strides", strides), ("rates", rates)):
        if len(values) != x.ndim or min(values) < 1:
            raise InvalidArgument(f"{attr}={list(values)} must hold {x.ndim} positive values, one per dimension of "
                                  f"input {input!r}", attr=attr)
        if values[0] != 1 or values[-1] != 1:  # as TF's kernels
            raise Unimplemented(f"{attr}={list(values)}: patches across the batch or channels are not supported; "
                                "use 1 in the first and last place", attr=attr)
    ksizes, strides, rates = ksizes[1:-1], strides[1:-1], rates[1:-1]
    spatial = x.shape[1:-1]
    effective = [(k - 1) * r + 1 for k, r in zip(ksizes, rates)]
    pads = lax.padtype_to_pads(spatial, effective, strides, padding)
    x = lax.pad(x, jnp.zeros((), x.dtype), [(0, 0, 0)] + [(lo, hi, 0) for lo, hi in pads] + [(0, 0, 0)])
    out = [(d + lo + hi - e) // s + 1 for d, (lo, hi), e, s in zip(spatial, pads, effective, strides)]
    patches = []
    for offset in itertools.product(*(range(k) for k in ksizes)):
        starts = [o * r for o, r in zip(offset, rates)]
        limits = [start + (n - 1) * s + 1 for start, n, s in zip(starts, out, strides)]
        patches.append(lax.slice(x, [0, *starts, 0], [x.shape[0], *limits, x.shape[-1]], [1, *strides, 1]))
    return jnp.concatenate(patches, axis=-1)


@register_op("ExtractImagePatches")
def extract_image_patches(ctx, images, *, ksizes, strides, rates, T, padding):
    return [extract_patches(images, ksizes, strides, rates, padding, "images", 4)]


@register_op("ExtractVolumePatches")
def extract_volume_patches(ctx, input, *, ksizes, strides, T, padding):
    return [extract_patches(input, ksizes, strides, [1] * len(ksizes), padding, "input", 5)]


def check_formats(src_format: str, dst_format: str) -> None:
    if sorted(src_format) != sorted(dst_format):
        raise InvalidArgument(f"dst_format {dst_format!r} must be a permutation of src_format {src_format!r}",
                              attr="dst_format")


@register_op("DataFormatDimMap", dtypes=INDEX)
def data_format_dim_map(ctx, x, *, T, src_format, dst_format):
    """The index in dst_format of each dimension index (possibly negative) of src_format."""
    check_formats(src_format, dst_format)
    table = np.array([dst_format.index(c) for c in src_format], x.dtype)
    return [jnp.take(table, jnp.mod(x, len(src_format)))]


@register_op("DataFormatVecPermute", dtypes=INDEX)
def data_format_vec_permute(ctx, x, *, T, src_format, dst_format):
    """A per-dimension vector ([n] or [n, 2]) from src_format order to dst_format order; a vector of the
    spatial dimensions only is permuted among them."""
    check_formats(src_format, dst_format)
    if x.ndim not in (1, 2) or x.shape[1:] not in ((), (2,)):
        raise InvalidArgument(f"input 'x' has shape {list(x.shape)}; it must be [n] or [n, 2]", input="x")
    if x.shape[0] == len(src_format):
        src, dst = src_format, dst_format
    else:
        src, dst = ("".join(c for c in f if c not in "NC") for f in (src_format, dst_format))
        if x.shape[0] != len(src):
            raise InvalidArgument(f"input 'x' has {x.shape[0]} rows; src_format {src_format!r} needs "
                                  f"{len(src_format)}, or {len(src)} for its spatial dimensions", input="x")
    return [jnp.take(x, np.array([src.index(c) for c in dst]), axis=0)]
