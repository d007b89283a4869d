"""Image sampling beyond the resize grid: ScaleAndTranslate (tf.image.resize's antialiased and kernel
methods) with its gradient, and CropAndResize.

As in image.py, weights that depend on shapes and constants are computed on the host with TF's formulas.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import InvalidArgument, check_rank
from xlacs_server.lower.ops.array import axes
from xlacs_server.lower.ops.image import F32, RESIZE_DTYPES, H, W, check_grads, output_size, resample, transpose_of
from xlacs_server.lower.ops.numerics import divide, multiply
from xlacs_server.lower.registry import register_op

CROP_DTYPES = (np.float16, np.float32, np.float64) + D.SIGNED + (np.uint8, np.uint16)

PI = F32(3.14159265359)


def lanczos(radius: float):
    def kernel(x):
        radius_ = F32(radius)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = radius_ * np.sin(PI * x) * np.sin(PI * x / radius_) / (PI * PI * x * x)
        return np.where(x > radius_, F32(0), np.where(x <= F32(1e-3), F32(1), value)).astype(F32)
    return kernel, radius


def gaussian(x):
    sigma = 1.5 / 3.0
    return np.where(x >= 1.5, 0, np.exp(-(x * x).astype(np.float64) / (2.0 * sigma * sigma))).astype(F32)


def cubic(near, far):
    """A piecewise cubic kernel of radius 2 from its polynomials on [0, 1) and [1, 2)."""
    return lambda x: np.where(x >= 2, F32(0), np.where(x >= 1, far(x), near(x))).astype(F32)


# kernel_type -> (kernel of |x| on float32 arrays, radius), as TF's sampling_kernels.h
SAMPLING_KERNELS = {
    "lanczos1": lanczos(1), "lanczos3": lanczos(3), "lanczos5": lanczos(5),
    "gaussian": (gaussian, 1.5),
    "box": (lambda x: np.where(x < 0.5, F32(1), np.where(x == 0.5, F32(0.5), F32(0))), 1.0),
    "triangle": (lambda x: np.where(x < 1, F32(1) - x, F32(0)), 1.0),
    "keyscubic": (cubic(lambda x: ((F32(1.5) * x - F32(2.5)) * x) * x + F32(1),
                        lambda x: ((F32(-0.5) * x + F32(2.5)) * x - F32(4)) * x + F32(2)), 2.0),
    "mitchellcubic": (cubic(lambda x: ((F32(7) / F32(6) * x - F32(2)) * x) * x + F32(8) / F32(9),
                            lambda x: ((F32(-7) / F32(18) * x + F32(2)) * x - F32(10) / F32(3)) * x
                            + F32(16) / F32(9)), 2.0),
}


def sampling_spans(kernel_type: str, out_size: int, in_size: int, scale, translate, antialias: bool):
    if kernel_type not in SAMPLING_KERNELS:
        raise InvalidArgument(f"kernel_type {kernel_type!r} is not one of {sorted(SAMPLING_KERNELS)}",
                              attr="kernel_type")
    kernel, radius = SAMPLING_KERNELS[kernel_type]
    inv_scale = F32(1.0 / float(scale))
    inv_translate = -inv_scale * F32(translate)
    kernel_scale = max(inv_scale, F32(1)) if antialias else F32(1)
    span = min(2 * int(np.ceil(F32(radius) * kernel_scale)) + 1, in_size)
    index = np.zeros((out_size, span), np.int64)
    weight = np.zeros((out_size, span), F32)
    for o in range(out_size):
        sample = (F32(o) + F32(0.5)) * inv_scale + inv_translate
        if sample < 0 or sample > in_size:  # sampling outside the image: an empty span
            continue
        start = int(np.clip(np.ceil(sample - F32(radius) * kernel_scale - F32(0.5)), 0, in_size - 1))
        end = int(np.clip(np.floor(sample + F32(radius) * kernel_scale - F32(0.5)), 0, in_size - 1)) + 1
        sources = np.arange(start, end)
        values = kernel(np.abs((sources.astype(F32) + F32(0.5) - sample) * (F32(1) / kernel_scale)))
        total = F32(0)
        for v in values:
            total = F32(total + v)
        if abs(total) >= 1000 * np.finfo(F32).tiny:
            weight[o, :len(values)] = values * (F32(1) / total)
        index[o] = np.minimum(start + np.arange(span), in_size - 1)
    return index, weight


def scale_and_translate(images, size, scale, translation, kernel_type: str, antialias: bool):
    rows, cols = (sampling_spans(kernel_type, n, images.shape[axis], s, t, antialias)
                  for axis, n, s, t in zip((H, W), size, scale, translation))
    return resample(resample(images.astype(F32), H, *rows), W, *cols)


def pair(value, input: str) -> tuple[float, float]:
    """A constant (height, width) pair of floats."""
    if np.shape(value) != (2,):
        raise InvalidArgument(f"input {input!r} has shape {list(np.shape(value))}; it must hold two values, for "
                              "the height and the width", input=input)
    return tuple(np.asarray(value, F32))


@register_op("ScaleAndTranslate", dtypes=RESIZE_DTYPES, constant_inputs=("size", "scale", "translation"))
def scale_and_translate_op(ctx, images, size, scale, translation, *, T, kernel_type, antialias):
    scale = pair(scale, "scale")
    if min(scale) <= 0:
        raise InvalidArgument(f"input 'scale' is {list(scale)}; it must be positive", input="scale")
    return [scale_and_translate(images, output_size(images, size), scale, pair(translation, "translation"),
                                kernel_type, antialias)]


@register_op("ScaleAndTranslateGrad", dtypes=(np.float32,), constant_inputs=("scale", "translation"))
def scale_and_translate_grad(ctx, grads, original_image, scale, translation, *, T, kernel_type, antialias):
    check_grads(grads, original_image.shape)
    size, scale, translation = grads.shape[1:3], pair(scale, "scale"), pair(translation, "translation")
    return [transpose_of(lambda x: scale_and_translate(x, size, scale, translation, kernel_type, antialias), grads,
                         original_image.shape, original_image.dtype)]


def crop_positions(low, high, crop_size: int, image_size: int):
    """Source positions of a box's samples, per box [boxes, crop_size], as TF's kernel computes them."""
    last = F32(image_size - 1)
    if crop_size == 1:  # the box's centre; TF's kernel multiplies in double
        return (0.5 * (low + high).astype(np.float64) * (image_size - 1)).astype(F32)[:, None]
    scale = divide((high - low) * last, F32(crop_size - 1))
    return multiply(low[:, None], last) + multiply(jnp.arange(crop_size, dtype=F32)[None, :], scale[:, None])


def crop_and_resize(image, boxes, box_ind, crop_size: tuple[int, int], method: str, extrapolation_value: float):
    if method not in ("bilinear", "nearest"):
        raise InvalidArgument(f"method must be 'bilinear' or 'nearest', got {method!r}", attr="method")
    check_rank(boxes, "boxes", rank=2)
    if boxes.shape[1] != 4:
        raise InvalidArgument(f"input 'boxes' has shape {list(boxes.shape)}; it must be [num_boxes, 4]",
                              input="boxes")
    if np.shape(box_ind) != boxes.shape[:1]:
        raise InvalidArgument(f"input 'box_ind' has shape {list(np.shape(box_ind))}; it must be [{boxes.shape[0]}], "
                              "one image index per box", input="box_ind")
    crop_height, crop_width = crop_size
    _, height, width, _ = image.shape
    boxes = boxes.astype(F32)
    y = crop_positions(boxes[:, 0], boxes[:, 2], crop_height, height)  # [boxes, crop_height]
    x = crop_positions(boxes[:, 1], boxes[:, 3], crop_width, width)
    inside = ((y >= 0) & (y <= height - 1))[:, :, None] & ((x >= 0) & (x <= width - 1))[:, None, :]
    image = jnp.asarray(image)
    batch = jnp.clip(box_ind, 0, image.shape[0] - 1)[:, None, None]

    def pixels(rows, cols):  # [boxes, crop_height, crop_width, depth]
        rows = jnp.clip(rows, 0, height - 1).astype(jnp.int32)[:, :, None]
        cols = jnp.clip(cols, 0, width - 1).astype(jnp.int32)[:, None, :]
        return image[batch, rows, cols].astype(F32)

    if method == "nearest":
        def nearest(p):
            return lax.round(p, lax.RoundingMethod.AWAY_FROM_ZERO)
        crops = pixels(nearest(y), nearest(x))
    else:
        top, left = jnp.floor(y), jnp.floor(x)
        y_lerp, x_lerp = (y - top)[:, :, None, None], (x - left)[:, None, :, None]
        top_left, top_right = pixels(top, left), pixels(top, jnp.ceil(x))
        bottom_left, bottom_right = pixels(jnp.ceil(y), left), pixels(jnp.ceil(y), jnp.ceil(x))
        upper = top_left + (top_right - top_left) * x_lerp
        lower = bottom_left + (bottom_right - bottom_left) * x_lerp
        crops = upper + (lower - upper) * y_lerp
    return jnp.where(inside[..., None], crops, F32(extrapolation_value))


@register_op("CropAndResize", dtypes=CROP_DTYPES, constant_inputs=("crop_size",))
def crop_and_resize_op(ctx, image, boxes, box_ind, crop_size, *, T, method, extrapolation_value):
    return [crop_and_resize(image, boxes, box_ind, output_size(image, crop_size, "image", "crop_size"), method,
                            extrapolation_value)]


# The gradients are those of the crop, a function that is linear in the image and piecewise smooth in the
# boxes (TF's kernels write out the same derivatives).

@register_op("CropAndResizeGradImage", dtypes=(np.float16, np.float32, np.float64), constant_inputs=("image_size",))
def crop_and_resize_grad_image(ctx, grads, boxes, box_ind, image_size, *, T, method):
    if np.shape(image_size) != (4,) or np.min(image_size) <= 0:
        raise InvalidArgument(f"input 'image_size' is {np.asarray(image_size).tolist()}; it must hold 4 positive "
                              "values, [batch, height, width, depth]", input="image_size")
    shape = axes(image_size)
    check_rank(grads, "grads", rank=4)
    return [transpose_of(lambda image: crop_and_resize(image, boxes, box_ind, grads.shape[1:3], method, 0.0), grads,
                         shape, T)]


@register_op("CropAndResizeGradBoxes", dtypes=CROP_DTYPES)
def crop_and_resize_grad_boxes(ctx, grads, image, boxes, box_ind, *, T, method):
    if method != "bilinear":
        raise InvalidArgument(f"method must be 'bilinear', got {method!r}", attr="method")
    check_rank(grads, "grads", rank=4)
    check_rank(image, "image", rank=4)
    _, backward = jax.vjp(lambda b: crop_and_resize(image, b, box_ind, grads.shape[1:3], method, 0.0), boxes)
    return list(backward(grads.astype(F32)))
