"""Colour-space conversion and adjustment: RGBToHSV, HSVToRGB, AdjustHue, AdjustSaturation, AdjustContrastv2.

Each follows the formulas of TF's CPU kernel for the op (they differ between ops), including its loops that
wrap hues by repeated addition.
"""
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import InvalidArgument, check_rank, check_scalar
from xlacs_server.lower.ops.numerics import multiply
from xlacs_server.lower.registry import register_op

F32 = np.float32
ADJUST_DTYPES = (np.float16, np.float32)


def channels(images, min_rank: int = 1):
    """The R, G, B (or H, S, V) planes of input 'images', of rank at least `min_rank`."""
    check_rank(images, "images", min_rank=min_rank)
    if images.shape[-1] != 3:
        raise InvalidArgument(f"input 'images' has shape {list(images.shape)}; its last dimension must hold 3 "
                              "channels", input="images")
    return images[..., 0], images[..., 1], images[..., 2]


def add_while(x, condition, step):
    """Adds `step` elementwise while `condition` holds, as TF's kernels wrap hues: repeated additions round
    differently from a modulo. Non-finite values are left alone (they would never leave the loop)."""
    def pending(v):
        return condition(v) & jnp.isfinite(v)
    return lax.while_loop(lambda v: jnp.any(pending(v)), lambda v: jnp.where(pending(v), v + step, v), x)


def select(cases, index):
    """cases[index] elementwise, for a small static list of cases."""
    return jnp.select([index == i for i in range(len(cases) - 1)], cases[:-1], cases[-1])


@register_op("RGBToHSV", dtypes=D.FLOAT)
def rgb_to_hsv(ctx, images, *, T):
    r, g, b = channels(images)
    one = jnp.ones((), images.dtype)
    value = jnp.maximum(jnp.maximum(r, g), b)
    spread = value - jnp.minimum(jnp.minimum(r, g), b)
    saturation = jnp.where(value > 0, spread / value, 0 * one)
    two_sixths, four_sixths = (2 * one) / (6 * one), (4 * one) / (6 * one)  # in T, as TF's T(2) / T(6)
    norm = (one / spread) * (one / (6 * one))
    hue = jnp.where(r == value, norm * (g - b),
                    jnp.where(g == value, norm * (b - r) + two_sixths, norm * (r - g) + four_sixths))
    hue = jnp.where(spread > 0, hue, 0 * one)
    hue = jnp.where(hue < 0, hue + one, hue)
    return [jnp.stack([hue, saturation, value], axis=-1)]


@register_op("HSVToRGB", dtypes=D.FLOAT)
def hsv_to_rgb(ctx, images, *, T):
    hue, saturation, value = channels(images)
    one = jnp.ones((), images.dtype)
    dh = hue * 6
    red = jnp.clip(jnp.abs(dh - 3) - one, 0, one)
    green = jnp.clip(-jnp.abs(dh - 2) + 2, 0, one)
    blue = jnp.clip(-jnp.abs(dh - 4) + 2, 0, one)
    unsaturated = -saturation + one
    return [jnp.stack([(unsaturated + saturation * c) * value for c in (red, green, blue)], axis=-1)]


def hue_and_range(r, g, b):
    """AdjustHue's decomposition: hue in [0, 6) and the smallest and largest components."""
    r_below_g = r < g
    largest = jnp.where(r_below_g, jnp.where(b > g, b, g), jnp.where((b > r) & ~(b < g), b, r))
    smallest = jnp.where(r_below_g, jnp.where(b < r, b, r), jnp.where(b < g, b, g))
    middle = jnp.where(r_below_g, jnp.where(b < r, r, jnp.where(b > g, g, b)),
                       jnp.where(b < g, g, jnp.where(b > r, r, b)))
    sector = jnp.where(r_below_g, jnp.where(b < r, 1, jnp.where(b > g, 3, 2)),
                       jnp.where(b < g, 0, jnp.where(b > r, 4, 5)))
    ratio = (middle - smallest) / (largest - smallest)
    hue = sector + jnp.where(sector % 2 == 0, ratio, 1 - ratio)
    return jnp.where(largest == smallest, F32(0), hue), smallest, largest


@register_op("AdjustHue", dtypes=ADJUST_DTYPES)
def adjust_hue(ctx, images, delta, *, T):
    check_scalar(delta, "delta")
    hue, smallest, largest = hue_and_range(*channels(images.astype(F32), min_rank=3))
    hue = hue + multiply(delta.astype(F32), F32(6))  # rounded before the sum: the sector is truncated from it
    hue = add_while(add_while(hue, lambda h: h < 0, F32(6)), lambda h: h >= 6, F32(-6))
    sector = hue.astype(jnp.int32)
    ratio = hue - sector
    ratio = jnp.where(sector % 2 == 0, ratio, 1 - ratio)
    middle = smallest + ratio * (largest - smallest)
    rgb = [(largest, middle, smallest), (middle, largest, smallest), (smallest, largest, middle),
           (smallest, middle, largest), (middle, smallest, largest), (largest, smallest, middle)]
    return [jnp.stack([select([c[i] for c in rgb], sector) for i in range(3)], axis=-1).astype(images.dtype)]


def saturation_hsv(r, g, b):
    """AdjustSaturation's RGB -> HSV, whose constants TF adds in double precision."""
    value = jnp.maximum(r, jnp.maximum(g, b))
    spread = value - jnp.minimum(r, jnp.minimum(g, b))
    saturation = jnp.where(value > 0, spread / value, F32(0))
    norm = F32(1) / (F32(6) * spread)

    def plus(x, constant):
        return (x.astype(np.float64) + constant).astype(F32)
    hue = jnp.where(r == value, norm * (g - b),
                    jnp.where(g == value, plus(norm * (b - r), 2.0 / 6.0), plus(norm * (r - g), 4.0 / 6.0)))
    hue = jnp.where(spread <= 0, F32(0), hue)
    return jnp.where(hue < 0, hue + F32(1), hue), saturation, value


@register_op("AdjustSaturation", dtypes=ADJUST_DTYPES)
def adjust_saturation(ctx, images, scale, *, T):
    check_scalar(scale, "scale")
    hue, saturation, value = saturation_hsv(*channels(images.astype(F32), min_rank=3))
    saturation = jnp.minimum(F32(1), jnp.maximum(F32(0), saturation * scale.astype(F32)))
    chroma = saturation * value
    lowest = value - chroma
    dh = hue * 6
    sector = dh.astype(jnp.int32)
    wrapped = add_while(add_while(dh, lambda h: h <= 0, F32(2)), lambda h: h >= 2, F32(-2))
    x = chroma * (1 - jnp.abs(wrapped - 1))
    zero = jnp.zeros_like(x)
    rgb = [(chroma, x, zero), (x, chroma, zero), (zero, chroma, x), (zero, x, chroma), (x, zero, chroma),
           (chroma, zero, x), (zero, zero, zero)]
    sector = jnp.where((sector >= 0) & (sector < 6), sector, 6)
    return [jnp.stack([select([c[i] for c in rgb], sector) + lowest for i in range(3)], axis=-1).astype(images.dtype)]


@register_op("AdjustContrastv2", dtypes=ADJUST_DTYPES)
def adjust_contrast_v2(ctx, images, contrast_factor, *, T):
    check_rank(images, "images", min_rank=3)
    check_scalar(contrast_factor, "contrast_factor")
    mean = jnp.mean(images.astype(F32), axis=(-3, -2), keepdims=True).astype(images.dtype)
    return [mean + ((images - mean).astype(F32) * contrast_factor.astype(F32)).astype(images.dtype)]
