"""Winograd's minimal filtering F(2x2, 3x3) for 3x3 convolutions of stride 1 (Lavin and Gray, 2015), the ops
the `winograd` pass (passes/winograd.py) rewrites such a Conv2D into.

Each 2x2 block of the output is A^T [(G g G^T) * (B^T d B)] A over the 4x4 input tile d around it: 16 products
per output block and channel pair instead of 36, 2.25x fewer multiplies. The products of all tiles are 16
matrix products [tiles, C] x [C, K], one per tile position. The filter's transform G g G^T depends on the weights
alone, so it is its own op, which the prepare split (compile/prepare.py) runs once per weight set; the per-call
convolution takes the transformed filter [4, 4, C, K]. The transforms only add, subtract and halve, which keeps
the result within a few ulps of the direct convolution's at these sizes.
"""
import functools

import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower.checks import InvalidArgument, check_dtype, check_rank
from xlacs_server.lower.registry import register_op

B_T = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float32)
G = np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]], np.float32)
A_T = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float32)


def transform(t, matrix: np.ndarray, axis: int, stride: int, count: int):
    """matrix applied along `axis` of t to `count` windows of matrix's width taken every `stride` elements, the
    results stacked on a new leading axis: each window element is a strided slice of t, each row of matrix a sum
    of them (its entries are 0 and +-1). One transform per axis, rather than the 16 elements of a tile each a
    slice, takes XLA:CPU 2-3x less time to compile, at the same speed."""
    def tap(i):
        start, limit, strides = [0] * t.ndim, list(t.shape), [1] * t.ndim
        start[axis], limit[axis], strides[axis] = i, i + stride * (count - 1) + 1, stride
        return lax.slice(t, start, limit, strides)
    taps = [tap(i) for i in range(matrix.shape[1])]
    rows = [functools.reduce(lax.add, [t if c == 1 else lax.neg(t) for c, t in zip(row, taps) if c])
            for row in matrix.tolist()]
    return lax.concatenate([lax.broadcast_in_dim(r, (1, *r.shape), tuple(range(1, r.ndim + 1))) for r in rows], 0)


def transform_filter(g):
    """G g G^T for a filter g [3, 3, C, K]: the transformed filter [4, 4, C, K]."""
    return jnp.einsum("ai,ijck,bj->abck", G.astype(g.dtype), g, G.astype(g.dtype))


def winograd_conv(x, u, padding: str):
    """The NHWC convolution of x with the 3x3 filter whose transform is u [4, 4, C, K], stride 1, SAME or VALID."""
    n, h, w, c = x.shape
    k = u.shape[-1]
    pad = 1 if padding == "SAME" else 0
    oh, ow = h + 2 * pad - 2, w + 2 * pad - 2
    th, tw = -(-oh // 2), -(-ow // 2)  # tiles of 2x2 outputs; the last may reach past the output
    x = lax.pad(x, np.zeros((), x.dtype), [(0, 0, 0), (pad, 2 * th + 2 - h - pad, 0), (pad, 2 * tw + 2 - w - pad, 0),
                                           (0, 0, 0)])
    v = transform(x, B_T, 2, 2, tw)  # d B over the columns of every 4x4 tile: [4 (s), n, rows, tw, c]
    v = transform(v, B_T, 2, 2, th)  # B^T d B: [4 (r), 4 (s), n, th, tw, c]
    m = lax.dot_general(lax.reshape(v, (16, n * th * tw, c)), lax.reshape(u, (16, c, k)),
                        (((2,), (1,)), ((0,), (0,))))  # one [tiles, c] x [c, k] product per tile position
    y = lax.index_in_dim(transform(lax.reshape(m, (4, 4, n, th, tw, k)), A_T, 0, 1, 1), 0, 1, False)  # [2, 4, ...]
    y = lax.index_in_dim(transform(y, A_T, 1, 1, 1), 0, 2, False)  # A^T m A: [2 (b), 2 (a), n, th, tw, k]
    y = lax.reshape(lax.transpose(y, (2, 3, 1, 4, 0, 5)), (n, 2 * th, 2 * tw, k))
    return lax.slice(y, (0, 0, 0, 0), (n, oh, ow, k))


@register_op("_WinogradFilter", dtypes=(np.float32,), internal=True)
def winograd_filter(ctx, filter, *, T):
    check_dtype(filter, "filter", T)
    check_rank(filter, "filter", rank=4)
    if filter.shape[:2] != (3, 3):
        raise InvalidArgument(f"input 'filter' of shape {list(filter.shape)} is not 3x3", input="filter")
    return [transform_filter(filter)]


@register_op("_WinogradConv2D", dtypes=(np.float32,), internal=True)
def winograd_conv2d(ctx, input, filter, *, T, padding):
    check_dtype(input, "input", T)
    check_dtype(filter, "filter", T)
    check_rank(input, "input", rank=4)
    check_rank(filter, "filter", rank=4)
    if filter.shape[:2] != (4, 4) or filter.shape[2] != input.shape[3] or padding not in ("SAME", "VALID"):
        raise InvalidArgument(f"a transformed filter [4, 4, {input.shape[3]}, K] and padding SAME or VALID expected, "
                              f"got {list(filter.shape)} and {padding!r}", input="filter")
    return [winograd_conv(input, filter, padding)]
