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

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import InvalidArgument, check_dtype, check_rank
from xlacs_server.lower.registry import register_op

B_T = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float32)
G = np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]], np.float32)
A_T = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float32)


def combine(matrix: np.ndarray, terms: list) -> list:
    """matrix @ terms, with terms a list of arrays: adds and subtracts only where the entries are +-1 or 0."""
    rows = []
    for row in matrix:
        signed = [t if c == 1 else lax.neg(t) if c == -1 else t * c for c, t in zip(row.tolist(), terms) if c]
        rows.append(functools.reduce(lax.add, signed))
    return rows


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
    # d[i][j]: element (i, j) of every 4x4 tile, [n, th, tw, c]
    d = [[lax.slice(x, (0, i, j, 0), (n, i + 2 * th - 1, j + 2 * tw - 1, c), (1, 2, 2, 1)) for j in range(4)]
         for i in range(4)]
    columns = [combine(B_T, [d[i][j] for i in range(4)]) for j in range(4)]  # B^T d: columns[j][r]
    v = [combine(B_T, [columns[j][r] for j in range(4)]) for r in range(4)]  # (B^T d) B: v[r][s]
    v = lax.concatenate([lax.reshape(v[r][s], (1, n * th * tw, c)) for r in range(4) for s in range(4)], 0)
    m = lax.dot_general(v, lax.reshape(u, (16, c, k)), (((2,), (1,)), ((0,), (0,))))  # [16, tiles, k]
    m = [[lax.index_in_dim(m, 4 * r + s, keepdims=False) for s in range(4)] for r in range(4)]
    columns = [combine(A_T, [m[r][s] for r in range(4)]) for s in range(4)]  # A^T m: columns[s][a]
    y = [combine(A_T, [columns[s][a] for s in range(4)]) for a in range(2)]  # (A^T m) A: y[a][b]
    y = lax.concatenate([lax.reshape(y[a][b], (1, 1, n, th, tw, k)) for a in range(2) for b in range(2)], 0)
    y = lax.reshape(lax.transpose(lax.reshape(y, (2, 2, n, th, tw, k)), (2, 3, 0, 4, 1, 5)), (n, 2 * th, 2 * tw, k))
    return lax.slice(y, (0, 0, 0, 0), (n, oh, ow, k))


@register_op("_WinogradFilter", dtypes=(np.float32,))
def winograd_filter(ctx, filter, *, T):
    check_dtype(filter, "filter", T)
    check_rank(filter, "filter", rank=4)
    if filter.shape[:2] != (3, 3):
        raise InvalidArgument(f"input 'filter' of shape {list(filter.shape)} is not 3x3", input="filter")
    return [transform_filter(filter)]


@register_op("_WinogradConv2D", dtypes=(np.float32,))
def winograd_conv2d(ctx, input, filter, *, T, padding):
    check_dtype(input, "input", T)
    check_dtype(filter, "filter", T)
    check_rank(input, "input", rank=4)
    check_rank(filter, "filter", rank=4)
    if filter.shape[:2] != (4, 4) or filter.shape[2] != input.shape[3] or padding not in ("SAME", "VALID"):
        raise InvalidArgument(f"a transformed filter [4, 4, {input.shape[3]}, K] and padding SAME or VALID expected, "
                              f"got {list(filter.shape)} and {padding!r}", input="filter")
    return [winograd_conv(input, filter, padding)]
