"""Bessel functions TF has as ops and jax lacks: J0, J1, Y0, Y1, K0, K1, and K0e, K1e (scaled by exp(x)).

Computed in float64 whatever T is. Below x = 2, the power series (DLMF 10.8.1, 10.31.1), twenty terms of
which are exact to rounding there. From x = 2 up, the steepest-descent integrals that underlie the Hankel
expansion (DLMF 10.9, 10.32.8): for n = 0, 1 and w = u / (2x),

    H_n(x) = sqrt(2 / (pi x)) exp(i (x - n pi / 2 - pi / 4)) / Gamma(n + 1/2) * I(i),   J = Re H, Y = Im H,
    K_n(x) = sqrt(pi / (2 x)) exp(-x) / Gamma(n + 1/2) * I(1),
    I(c) = int_0^inf exp(-u) u^(n - 1/2) (1 + c w)^(n - 1/2) du,

with u = s^2, an integral of an analytic function of s over the real line, which the trapezoid rule gets to
rounding with forty nodes (its singularity stays at least sqrt(2) away from the real axis).
"""
import functools
import math

import jax.numpy as jnp
import numpy as np

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.registry import register_op

SERIES_BELOW = 2.0
TERMS = 20
EULER_GAMMA = 0.5772156649015329

_k = np.arange(TERMS)
_factorial = np.array([math.factorial(k) for k in range(TERMS + 1)], np.float64)
_harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, TERMS))])  # H_k
_digamma = -EULER_GAMMA + _harmonic  # psi(k + 1)
_digamma_next = -EULER_GAMMA + _harmonic + 1.0 / (_k + 1)  # psi(k + 2)
# Series coefficients of w^k, w = x^2 / 4.
_ORDER0 = 1.0 / _factorial[:TERMS] ** 2
_ORDER1 = 1.0 / (_factorial[:TERMS] * _factorial[1:TERMS + 1])

_STEP = 1.0 / 6
_s = np.arange(40) * _STEP
_trapezoid = np.where(_s == 0, 1.0, 2.0) * _STEP * np.exp(-_s * _s)  # the even integrand's nodes on [0, inf)


def _series(coefficients, w):
    return jnp.polyval(jnp.asarray(coefficients[::-1]), w)


def _integral(x, order: int, rotation):
    """I(c) / Gamma(order + 1/2) at x >= 2, for rotation c = 1j (Hankel) or 1 (K)."""
    t = (_s * _s)[None, :] / (2 * x[..., None])
    weights = _trapezoid * _s ** (2 * order)
    factor = jnp.sqrt(1 + rotation * t)
    integrand = weights * (factor if order else 1 / factor)
    return jnp.sum(integrand, axis=-1) / math.gamma(order + 0.5)


def _hankel(x, order: int):
    phase = x - order * np.pi / 2 - np.pi / 4
    return jnp.sqrt(2 / (np.pi * x)) * jnp.exp(1j * phase) * _integral(x, order, 1j)


def _small(x):
    return jnp.where(x < SERIES_BELOW, x, 1.0)  # keeps the unused branch finite


def _large(x):
    return jnp.where(x < SERIES_BELOW, SERIES_BELOW, x)


def _j(x, order: int):
    a = jnp.abs(x)
    s, w = _small(a), _small(a) ** 2 / 4
    series = _series(_ORDER0 * (-1.0) ** _k, w) if order == 0 else s / 2 * _series(_ORDER1 * (-1.0) ** _k, w)
    value = jnp.where(a < SERIES_BELOW, series, jnp.real(_hankel(_large(a), order)))
    return value if order == 0 else jnp.sign(x) * value  # J0 is even, J1 odd


def _y(x, order: int):
    s, w = _small(x), _small(x) ** 2 / 4
    log = jnp.log(s / 2)
    if order == 0:
        series = 2 / np.pi * ((log + EULER_GAMMA) * _j(s, 0) - _series(_harmonic * _ORDER0 * (-1.0) ** _k, w))
    else:
        series = (2 / np.pi * log * _j(s, 1) - 2 / (np.pi * s)
                  - s / (2 * np.pi) * _series((_digamma + _digamma_next) * _ORDER1 * (-1.0) ** _k, w))
    value = jnp.where(x < SERIES_BELOW, series, jnp.imag(_hankel(_large(x), order)))
    return jnp.where(x > 0, value, -jnp.inf)  # TF's Y at x <= 0, negative x included


def _k_scaled(x, order: int):
    """exp(x) K_order(x)."""
    s, w = _small(x), _small(x) ** 2 / 4
    log = jnp.log(s / 2)
    if order == 0:
        series = -(log + EULER_GAMMA) * _series(_ORDER0, w) + _series(_harmonic * _ORDER0, w)
    else:
        series = 1 / s + log * s / 2 * _series(_ORDER1, w) - s / 4 * _series((_digamma + _digamma_next) * _ORDER1, w)
    large = _large(x)
    value = jnp.where(x < SERIES_BELOW, jnp.exp(s) * series, jnp.sqrt(np.pi / (2 * large)) * _integral(large, order, 1))
    return jnp.where(x > 0, value, jnp.inf)  # TF's K at x <= 0, negative x included


BESSEL = {
    "BesselJ0": lambda x: _j(x, 0),
    "BesselJ1": lambda x: _j(x, 1),
    "BesselY0": lambda x: _y(x, 0),
    "BesselY1": lambda x: _y(x, 1),
    "BesselK0": lambda x: jnp.exp(-jnp.abs(x)) * _k_scaled(x, 0),
    "BesselK1": lambda x: jnp.exp(-jnp.abs(x)) * _k_scaled(x, 1),
    "BesselK0e": lambda x: _k_scaled(x, 0),
    "BesselK1e": lambda x: _k_scaled(x, 1),
}


def bessel(fn, ctx, x, *, T):
    return [fn(x.astype(np.float64)).astype(x.dtype)]


for _op, _fn in BESSEL.items():
    register_op(_op, dtypes=D.FLOAT)(functools.partial(bessel, _fn))
