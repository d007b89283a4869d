"""Rearrangements between space, batch and depth, patch extraction, and data-format permutations."""
import itertools

import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower.dtypes import INDEX
from xlacs_server.lower.ops.array import INT32, axes
from xlacs_server.lower.ops.slicing import paddings_of
from xlacs_server.lower.registry import register_op


def space_to_batch_nd(x, block: tuple[int, ...], paddings):
    m = len(block)
    pads = paddings_of(paddings)
    padding = [(0, 0, 0)] + [(lo, hi, 0) for lo, hi in pads] + [(0, 0, 0)] * (x.ndim - 1 - m)
    x = lax.pad(x, jnp.zeros((), x.dtype), padding)
    batch, spatial, rest = x.shape[0], x.shape[1:1 + m], x.shape[1 + m:]
    if any(d % b for d, b in zip(spatial, block)):
        raise ValueError(f"padded spatial shape {list(spatial)} is not divisible by block_shape {list(block)}")
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
        raise ValueError(f"batch {batch} is not divisible by the block_shape product {count}")
    x = jnp.reshape(x, list(block) + [batch // count] + list(spatial) + list(rest))
    # [b1, ..., bM, batch, d1, ..., dM, rest] -> [batch, d1, b1, ..., dM, bM, rest]
    perm = [m] + [n for i in range(m) for n in (m + 1 + i, i)] + list(range(2 * m + 1, x.ndim))
    x = jnp.reshape(jnp.transpose(x, perm), [batch // count] + [d * b for d, b in zip(spatial, block)] + list(rest))
    limits = [(0, x.shape[0])] + [(lo, x.shape[1 + i] - hi) for i, (lo, hi) in enumerate(paddings_of(crops))]
    return lax.slice(x, [lo for lo, _ in limits] + [0] * len(rest), [hi for _, hi in limits] + list(rest))


@register_op("SpaceToBatchND", constant_inputs=("block_shape", "paddings"))
def space_to_batch_nd_op(ctx, input, block_shape, paddings, *, T, Tblock_shape=INT32, Tpaddings=INT32):
    return [space_to_batch_nd(input, axes(block_shape), paddings)]


@register_op("SpaceToBatch", constant_inputs=("paddings",))
def space_to_batch(ctx, input, paddings, *, T, block_size, Tpaddings=INT32):
    return [space_to_batch_nd(input, (block_size, block_size), paddings)]


@register_op("BatchToSpaceND", constant_inputs=("block_shape", "crops"))
def batch_to_space_nd_op(ctx, input, block_shape, crops, *, T, Tblock_shape=INT32, Tcrops=INT32):
    return [batch_to_space_nd(input, axes(block_shape), crops)]


@register_op("BatchToSpace", constant_inputs=("crops",))
def batch_to_space(ctx, input, crops, *, T, block_size, Tidx=INT32):
    return [batch_to_space_nd(input, (block_size, block_size), crops)]


def channels_last(fn, x, data_format: str):
    """fn of an NHWC tensor, applied to x in data_format (NCHW_VECT_C's int8x4 packing is not supported)."""
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"data_format {data_format!r} is not supported; use NHWC or NCHW")
    if data_format == "NHWC":
        return fn(x)
    return jnp.transpose(fn(jnp.transpose(x, (0, 2, 3, 1))), (0, 3, 1, 2))


def space_to_depth_nhwc(x, b: int):
    n, h, w, c = x.shape
    if h % b or w % b:
        raise ValueError(f"height {h} and width {w} must be divisible by block_size {b}")
    x = jnp.transpose(jnp.reshape(x, (n, h // b, b, w // b, b, c)), (0, 1, 3, 2, 4, 5))
    return jnp.reshape(x, (n, h // b, w // b, b * b * c))


def depth_to_space_nhwc(x, b: int):
    n, h, w, c = x.shape
    if c % (b * b):
        raise ValueError(f"depth {c} must be divisible by block_size squared ({b * b})")
    x = jnp.transpose(jnp.reshape(x, (n, h, w, b, b, c // (b * b))), (0, 1, 3, 2, 4, 5))
    return jnp.reshape(x, (n, h * b, w * b, c // (b * b)))


@register_op("SpaceToDepth")
def space_to_depth(ctx, input, *, T, block_size, data_format="NHWC"):
    return [channels_last(lambda x: space_to_depth_nhwc(x, block_size), input, data_format)]


@register_op("DepthToSpace")
def depth_to_space(ctx, input, *, T, block_size, data_format="NHWC"):
    return [channels_last(lambda x: depth_to_space_nhwc(x, block_size), input, data_format)]


def extract_patches(x, ksizes, strides, rates, padding: str):
    """Patches of the spatial dims of a channels-last x, flattened into depth in (kernel..., channel) order."""
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
    return [extract_patches(images, ksizes, strides, rates, padding)]


@register_op("ExtractVolumePatches")
def extract_volume_patches(ctx, input, *, ksizes, strides, T, padding):
    return [extract_patches(input, ksizes, strides, [1] * len(ksizes), padding)]


def check_formats(src_format: str, dst_format: str) -> None:
    if sorted(src_format) != sorted(dst_format):
        raise ValueError(f"dst_format {dst_format!r} must be a permutation of src_format {src_format!r}")


@register_op("DataFormatDimMap", dtypes=INDEX)
def data_format_dim_map(ctx, x, *, T=INT32, src_format="NHWC", dst_format="NCHW"):
    """The index in dst_format of each dimension index (possibly negative) of src_format."""
    check_formats(src_format, dst_format)
    table = np.array([dst_format.index(c) for c in src_format], x.dtype)
    return [jnp.take(table, jnp.mod(x, len(src_format)))]


@register_op("DataFormatVecPermute", dtypes=INDEX)
def data_format_vec_permute(ctx, x, *, T=INT32, src_format="NHWC", dst_format="NCHW"):
    """A per-dimension vector ([n] or [n, 2]) from src_format order to dst_format order; a vector of the
    spatial dimensions only is permuted among them."""
    check_formats(src_format, dst_format)
    if x.shape[0] == len(src_format):
        src, dst = src_format, dst_format
    else:
        src, dst = ("".join(c for c in f if c not in "NC") for f in (src_format, dst_format))
        if x.shape[0] != len(src):
            raise ValueError(f"x has {x.shape[0]} rows; {src_format} needs {len(src_format)} or {len(src)}")
    return [jnp.take(x, np.array([src.index(c) for c in dst]), axis=0)]
