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
from xlacs_server.lower.ops.array import axes
from xlacs_server.lower.registry import register_op

REAL = (np.float32, np.float64)
COMPLEX64 = np.dtype(np.complex64)
FLOAT32 = np.dtype(np.float32)


def _inner(rank: int) -> tuple[int, ...]:
    return tuple(range(-rank, 0))


def complex_fft(transform, rank, ctx, input, *, Tcomplex=COMPLEX64):
    return [transform(input, axes=_inner(rank))]


def real_fft(rank, ctx, input, fft_length, *, Treal=FLOAT32, Tcomplex=COMPLEX64):
    return [jnp.fft.rfftn(input, s=axes(fft_length), axes=_inner(rank)).astype(Tcomplex)]


def inverse_real_fft(rank, ctx, input, fft_length, *, Treal=FLOAT32, Tcomplex=COMPLEX64):
    return [jnp.fft.irfftn(input, s=axes(fft_length), axes=_inner(rank)).astype(Treal)]


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
    return {"s": axes(fft_length) or None, "axes": axes(axes_) or tuple(range(ndim))}


def complex_fft_nd(transform, ctx, input, fft_length, axes, *, Tcomplex=COMPLEX64):
    return [transform(input, **_nd(fft_length, axes, input.ndim))]


register_op("FFTND", dtypes=D.COMPLEX, type_attr="Tcomplex", constant_inputs=("fft_length", "axes"))(
    functools.partial(complex_fft_nd, jnp.fft.fftn))
register_op("IFFTND", dtypes=D.COMPLEX, type_attr="Tcomplex", constant_inputs=("fft_length", "axes"))(
    functools.partial(complex_fft_nd, jnp.fft.ifftn))


@register_op("RFFTND", dtypes=REAL, type_attr="Treal", constant_inputs=("fft_length", "axes"))
def real_fft_nd(ctx, input, fft_length, axes, *, Treal=FLOAT32, Tcomplex=COMPLEX64):
    return [jnp.fft.rfftn(input, **_nd(fft_length, axes, input.ndim)).astype(Tcomplex)]


@register_op("IRFFTND", dtypes=REAL, type_attr="Treal", constant_inputs=("fft_length", "axes"))
def inverse_real_fft_nd(ctx, input, fft_length, axes, *, Treal=FLOAT32, Tcomplex=COMPLEX64):
    return [jnp.fft.irfftn(input, **_nd(fft_length, axes, input.ndim)).astype(Treal)]
