"""Diagonals and bands of matrices: MatrixBandPart, the MatrixDiag/DiagPart/SetDiag families, Diag, DiagPart.

The V2/V3 ops address a band of diagonals k = (low, high); diagonal d holds the elements (i, i + d). Diagonals
shorter than the longest are padded on the side that `align` names ("superdiagonal_subdiagonal", d = 0 counts
as a superdiagonal); V1 and V2 align everything to the left. Gather tables are built with numpy, since every
shape and k is a compile-time constant.
"""
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D, limits
from xlacs_server.lower.checks import InvalidArgument, check_rank, check_scalar
from xlacs_server.lower.context import is_constant
from xlacs_server.lower.ops.array import axes
from xlacs_server.lower.registry import register_op

V2_ALIGN = "LEFT_LEFT"


@register_op("MatrixBandPart", dtypes=D.ALL)
def matrix_band_part(ctx, input, num_lower, num_upper, *, T, Tindex):
    check_rank(input, "input", min_rank=2)
    rows, cols = input.shape[-2:]
    for name, value, most in (("num_lower", num_lower, rows), ("num_upper", num_upper, cols)):
        check_scalar(value, name)
        if is_constant(value) and value > most:
            raise InvalidArgument(f"input {name!r} is {int(value)}; it must be negative (all) or at most {most}",
                                  input=name)
    i = lax.broadcasted_iota(np.int64, (rows, cols), 0)
    j = lax.broadcasted_iota(np.int64, (rows, cols), 1)
    keep = ((num_lower < 0) | (i - j <= num_lower)) & ((num_upper < 0) | (j - i <= num_upper))  # negative: all
    return [jnp.where(keep, input, jnp.zeros((), input.dtype))]


def _band(k, rows: int | None = None, cols: int | None = None) -> tuple[int, int]:
    """The (low, high) diagonals of input `k`, a scalar or a pair; within a matrix of rows x cols if given."""
    if np.ndim(k) > 1 or np.size(k) not in (1, 2):
        raise InvalidArgument(f"input 'k' is {np.asarray(k).tolist()}; it must be one diagonal index or a pair "
                              "(low, high)", input="k")
    k = axes(k)
    low, high = (k[0], k[0]) if len(k) == 1 else k
    if low > high:
        raise InvalidArgument(f"input 'k' is {list(k)}: the lower diagonal index must not exceed the upper one",
                              input="k")
    if rows is not None and any(not (-rows < d < cols or d == 0) for d in (low, high)):
        raise InvalidArgument(f"input 'k' is {list(k)}: the diagonals of a {rows} x {cols} matrix are in "
                              f"[{-rows + 1}, {cols - 1}]", input="k")
    return low, high


def _length(d: int, rows: int, cols: int) -> int:
    return min(rows + min(0, d), cols - max(0, d))


def _offset(d: int, max_length: int, rows: int, cols: int, align: str) -> int:
    """Where diagonal d starts in its padded row of the packed diagonals."""
    superdiagonal, subdiagonal = align.split("_")
    right = (superdiagonal if d >= 0 else subdiagonal) == "RIGHT"
    return max_length - _length(d, rows, cols) if right else 0


def _packed_positions(rows, cols, low, high, max_length, align):
    """For each matrix element: whether it lies in the band, and its flat index in [num_diags * max_length]."""
    i, j = np.indices((rows, cols))
    d = j - i
    in_band = (low <= d) & (d <= high)
    offsets = np.array([_offset(x, max_length, rows, cols, align) for x in range(low, high + 1)], np.int64)
    position = (high - d) * max_length + np.minimum(i, j) + offsets[np.clip(d - low, 0, high - low)]
    return in_band, np.where(in_band, position, 0)


def _from_packed(diagonal, rows, cols, low, high, align):
    """The band's elements, gathered from diagonals packed as [..., num_diags, max_length], and where they go."""
    max_length = diagonal.shape[-1]
    if low == high:
        diagonal = diagonal[..., None, :]
    in_band, position = _packed_positions(rows, cols, low, high, max_length, align)
    flat = jnp.reshape(diagonal, diagonal.shape[:-2] + (-1,))
    return in_band, jnp.take(flat, position.reshape(-1), axis=-1).reshape(flat.shape[:-1] + (rows, cols))


def matrix_from_diagonals(diagonal, k, num_rows, num_cols, padding_value, align):
    """MatrixDiagV3: a matrix (num_rows or num_cols -1: the smallest that fits) holding the packed diagonals."""
    low, high = _band(k)
    check_rank(diagonal, "diagonal", min_rank=1 if low == high else 2)
    if low != high and diagonal.shape[-2] != high - low + 1:
        raise InvalidArgument(f"input 'diagonal' has shape {list(diagonal.shape)}: k = ({low}, {high}) needs "
                              f"{high - low + 1} diagonals in its second-to-last dimension", input="diagonal")
    check_scalar(padding_value, "padding_value")
    max_length = diagonal.shape[-1]
    min_rows, min_cols = max_length - min(high, 0), max_length + max(low, 0)
    check_scalar(num_rows, "num_rows")
    check_scalar(num_cols, "num_cols")
    rows, cols = int(num_rows), int(num_cols)  # -1: the smallest square (or rectangle) that fits, as TF
    if rows == -1 and cols == -1:
        rows = cols = max(min_rows, min_cols)
    rows, cols = (min_rows if rows == -1 else rows), (min_cols if cols == -1 else cols)
    if rows < min_rows or cols < min_cols:
        raise InvalidArgument(f"a {rows} x {cols} matrix cannot hold the diagonals {list(diagonal.shape)} with k = "
                              f"({low}, {high}): it needs at least {min_rows} x {min_cols}",
                              input="num_rows" if rows < min_rows else "num_cols")
    if rows != min_rows and cols != min_cols:  # then the diagonals would be shorter than the matrix's
        raise InvalidArgument(f"a {rows} x {cols} matrix does not fit the diagonals {list(diagonal.shape)} with k = "
                              f"({low}, {high}): num_rows must be {min_rows} or num_cols {min_cols}", input="num_rows")
    limits.check_shape("the diagonal matrix", (*diagonal.shape[:-1 if low == high else -2], rows, cols))
    in_band, values = _from_packed(diagonal, rows, cols, low, high, align)
    return [jnp.where(in_band, values, jnp.asarray(padding_value, diagonal.dtype))]


def _matrix_diag_part(input, k, padding_value, align):
    check_rank(input, "input", min_rank=2)
    check_scalar(padding_value, "padding_value")
    rows, cols = input.shape[-2:]
    low, high = _band(k, rows, cols)
    max_length = min(rows + min(high, 0), cols - max(low, 0))
    diagonals = range(high, low - 1, -1)  # the output's rows, from the highest diagonal down
    d = np.array(diagonals)[:, None]
    lengths = np.array([_length(x, rows, cols) for x in diagonals])[:, None]
    offsets = np.array([_offset(x, max_length, rows, cols, align) for x in diagonals])[:, None]
    index = np.arange(max_length)[None, :] - offsets  # the position along each diagonal
    valid = (index >= 0) & (index < lengths)
    position = np.where(valid, (index + np.maximum(-d, 0)) * cols + index + np.maximum(d, 0), 0)
    flat = jnp.reshape(input, input.shape[:-2] + (rows * cols,))
    values = jnp.take(flat, position.reshape(-1), axis=-1).reshape(flat.shape[:-1] + valid.shape)
    out = jnp.where(valid, values, jnp.asarray(padding_value, input.dtype))
    return [out[..., 0, :] if low == high else out]


def _matrix_set_diag(input, diagonal, k, align):
    check_rank(input, "input", min_rank=2)
    rows, cols = input.shape[-2:]
    low, high = _band(k, rows, cols)
    max_length = min(rows + min(high, 0), cols - max(low, 0))
    want = input.shape[:-2] + ((max_length,) if low == high else (high - low + 1, max_length))
    if np.shape(diagonal) != want:
        raise InvalidArgument(f"input 'diagonal' has shape {list(np.shape(diagonal))}; the diagonals k = ({low}, "
                              f"{high}) of input 'input' {list(input.shape)} need {list(want)}", input="diagonal")
    in_band, values = _from_packed(diagonal, *input.shape[-2:], low, high, align)
    return [jnp.where(in_band, values, input)]


@register_op("MatrixDiagV3", dtypes=D.ALL, constant_inputs=("k", "num_rows", "num_cols"))
def matrix_diag_v3(ctx, diagonal, k, num_rows, num_cols, padding_value, *, T, align):
    return matrix_from_diagonals(diagonal, k, num_rows, num_cols, padding_value, align)


@register_op("MatrixDiagV2", dtypes=D.ALL, constant_inputs=("k", "num_rows", "num_cols"))
def matrix_diag_v2(ctx, diagonal, k, num_rows, num_cols, padding_value, *, T):
    return matrix_from_diagonals(diagonal, k, num_rows, num_cols, padding_value, V2_ALIGN)


@register_op("MatrixDiag", dtypes=D.ALL)
def matrix_diag(ctx, diagonal, *, T):
    return matrix_from_diagonals(diagonal, 0, -1, -1, 0, V2_ALIGN)


@register_op("MatrixDiagPartV3", dtypes=D.ALL, constant_inputs=("k",))
def matrix_diag_part_v3(ctx, input, k, padding_value, *, T, align):
    return _matrix_diag_part(input, k, padding_value, align)


@register_op("MatrixDiagPartV2", dtypes=D.ALL, constant_inputs=("k",))
def matrix_diag_part_v2(ctx, input, k, padding_value, *, T):
    return _matrix_diag_part(input, k, padding_value, V2_ALIGN)


@register_op("MatrixDiagPart", dtypes=D.ALL)
def matrix_diag_part(ctx, input, *, T):
    return _matrix_diag_part(input, 0, 0, V2_ALIGN)


@register_op("MatrixSetDiagV3", dtypes=D.ALL, constant_inputs=("k",))
def matrix_set_diag_v3(ctx, input, diagonal, k, *, T, align):
    return _matrix_set_diag(input, diagonal, k, align)


@register_op("MatrixSetDiagV2", dtypes=D.ALL, constant_inputs=("k",))
def matrix_set_diag_v2(ctx, input, diagonal, k, *, T):
    return _matrix_set_diag(input, diagonal, k, V2_ALIGN)


@register_op("MatrixSetDiag", dtypes=D.ALL)
def matrix_set_diag(ctx, input, diagonal, *, T):
    return _matrix_set_diag(input, diagonal, 0, V2_ALIGN)


@register_op("Diag", dtypes=D.FLOAT + (np.int32, np.int64) + D.COMPLEX)
def diag(ctx, diagonal, *, T):
    """A tensor of rank 2r whose element [i..., i...] is diagonal[i...], zero elsewhere."""
    check_rank(diagonal, "diagonal", min_rank=1)
    n = int(np.prod(diagonal.shape, dtype=np.int64))
    return [jnp.reshape(jnp.diag(jnp.reshape(diagonal, (n,))), diagonal.shape * 2)]


@register_op("DiagPart", dtypes=D.FLOAT + (np.int32, np.int64) + D.COMPLEX)
def diag_part(ctx, input, *, T):
    shape = input.shape[:input.ndim // 2]
    if input.ndim == 0 or input.ndim % 2 or input.shape[input.ndim // 2:] != shape:
        raise InvalidArgument(f"input 'input' has shape {list(input.shape)}; it must be of the form s + s, s not "
                              "empty", input="input")
    n = int(np.prod(shape, dtype=np.int64))
    return [jnp.reshape(jnp.diagonal(jnp.reshape(input, (n, n))), shape)]
