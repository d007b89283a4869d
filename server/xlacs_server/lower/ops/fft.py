"""Fast Fourier transforms: FFT, IFFT, RFFT, IRFFT over the innermost 1, 2 or 3 dimensions (the 2D and 3D forms)
or over given axes (the ND forms).

RFFT and IRFFT take fft_length (and the ND forms their axes) as compile-time constants; the input is cropped
or zero-padded to it (for IRFFT, its innermost dimension to fft_length[-1] // 2 + 1), as TF documents and
numpy does (TF's CPU kernels only crop: they reject a shorter input).
"""
import functools

import jax.numpy as jnp
import numpy as np

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import InvalidArgument, check_axes, check_rank
from xlacs_server.lower.ops.array import axes
from xlacs_server.lower.registry import register_op

REAL = (np.float32, np.float64)


def _inner(input, rank: int) -> tuple[int, ...]:
    """The innermost `rank` axes, which `input` must have."""
    check_rank(input, "input", min_rank=rank)
    return tuple(range(-rank, 0))


def _lengths(fft_length, count: int) -> tuple[int, ...]:
    """The fft_length input: `count` positive lengths."""
    if np.shape(fft_length) != (count,) or np.any(fft_length <= 0):
        raise InvalidArgument(f"input 'fft_length' is {np.asarray(fft_length).tolist()}; it must hold {count} "
                              "positive length(s), one per transformed dimension", input="fft_length")
    return axes(fft_length)


def complex_fft(transform, rank, ctx, input, *, Tcomplex):
    return [transform(input, axes=_inner(input, rank))]


def real_fft(rank, ctx, input, fft_length, *, Treal, Tcomplex):
    inner = _inner(input, rank)
    return [jnp.fft.rfftn(input, s=_lengths(fft_length, rank), axes=inner).astype(Tcomplex)]


def inverse_real_fft(rank, ctx, input, fft_length, *, Treal, Tcomplex):
    inner = _inner(input, rank)
    return [jnp.fft.irfftn(input, s=_lengths(fft_length, rank), axes=inner).astype(Treal)]


for _rank, _suffix in ((1, ""), (2, "2D"), (3, "3D")):
    register_op("FFT" + _suffix, dtypes=D.COMPLEX, type_attr="Tcomplex")(
        functools.partial(complex_fft, jnp.fft.fftn, _rank))
    register_op("IFFT" + _suffix, dtypes=D.COMPLEX, type_attr="Tcomplex")(
        functools.partial(complex_fft, jnp.fft.ifftn, _rank))
    register_op("RFFT" + _suffix, dtypes=REAL, type_attr="Treal", constant_inputs=("fft_length",))(
        functools.partial(real_fft, _rank))
    register_op("IRFFT" + _suffix, dtypes=REAL, type_attr="Treal", constant_inputs=("fft_length",))(
        functools.partial(inverse_real_fft, _rank))


def _nd(fft_length, axes_, ndim: int) -> dict:
    """numpy's s and axes for the ND ops: no axes means all of them; no lengths, the input's own."""
    check_rank(axes_, "axes", rank=1)
    dims = check_axes(axes_, ndim, "axes") or tuple(range(ndim))
    return {"s": _lengths(fft_length, len(dims)) if np.size(fft_length) else None, "axes": dims}


def complex_fft_nd(transform, ctx, input, fft_length, axes, *, Tcomplex):
    return [transform(input, **_nd(fft_length, axes, input.ndim))]


register_op("FFTND", dtypes=D.COMPLEX, type_attr="Tcomplex", constant_inputs=("fft_length", "axes"))(
    functools.partial(complex_fft_nd, jnp.fft.fftn))
register_op("IFFTND", dtypes=D.COMPLEX, type_attr="Tcomplex", constant_inputs=("fft_length", "axes"))(
    functools.partial(complex_fft_nd, jnp.fft.ifftn))


@register_op("RFFTND", dtypes=REAL, type_attr="Treal", constant_inputs=("fft_length", "axes"))
def real_fft_nd(ctx, input, fft_length, axes, *, Treal, Tcomplex):
    return [jnp.fft.rfftn(input, **_nd(fft_length, axes, input.ndim)).astype(Tcomplex)]


@register_op("IRFFTND", dtypes=REAL, type_attr="Treal", constant_inputs=("fft_length", "axes"))
def inverse_real_fft_nd(ctx, input, fft_length, axes, *, Treal, Tcomplex):
    return [jnp.fft.irfftn(input, **_nd(fft_length, axes, input.ndim)).astype(Treal)]
