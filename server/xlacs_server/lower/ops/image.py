"""Image resizing (bilinear, nearest neighbour, bicubic, area) and the resize gradients.

Sampling positions and weights depend on shapes only, so they are computed on the host in float32 with the
formulas and operation order of TF's CPU kernels; the program gathers rows and columns and blends them.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np

from xlacs_server.lower import dtypes as D, limits
from xlacs_server.lower.checks import InvalidArgument, check_rank
from xlacs_server.lower.ops.array import axes
from xlacs_server.lower.registry import register_op

F32 = np.float32
RESIZE_DTYPES = D.FLOAT + D.SIGNED + (np.uint8, np.uint16)
NEAREST_GRAD_DTYPES = D.FLOAT + (np.int8, np.uint8, np.int32)
H, W = 1, 2  # the spatial axes of NHWC images


def output_size(images, size, images_input: str = "images", size_input: str = "size") -> tuple[int, int]:
    """The (height, width) of input `size_input` for NHWC input `images_input`."""
    check_rank(images, images_input, rank=4)
    if np.shape(size) != (2,) or np.min(size) <= 0:
        raise InvalidArgument(f"input {size_input!r} is {np.asarray(size).tolist()}; it must hold two positive values, "
                              "the output's height and width", input=size_input)
    size = axes(size)
    limits.check_shape("the resized images", (images.shape[0], *size, images.shape[3]))
    return size


def resize_scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if align_corners and out_size > 1:
        return F32(in_size - 1) / F32(out_size - 1)
    return F32(in_size) / F32(out_size)


def check_corners(align_corners: bool, half_pixel_centers: bool) -> None:
    if align_corners and half_pixel_centers:
        raise InvalidArgument("half_pixel_centers=True requires align_corners=False", attr="half_pixel_centers")


def source_positions(out_size: int, scale, half_pixel_centers: bool, shift=F32(0.5)) -> np.ndarray:
    """TF's scalers: out * scale, or (out + 0.5) * scale - shift with half-pixel centers."""
    out = np.arange(out_size, dtype=F32)
    return (out + F32(0.5)) * scale - shift if half_pixel_centers else out * scale


def along(vector, axis: int) -> np.ndarray:
    """A per-row (axis H) or per-column (axis W) vector shaped to broadcast against NHWC."""
    return np.reshape(vector, (-1,) + (1,) * (3 - axis))


def round_half_away(x: np.ndarray) -> np.ndarray:
    """C's roundf, without the double rounding of x + 0.5."""
    whole = np.floor(np.abs(x))
    return np.copysign(whole + (np.abs(x) - whole >= 0.5), x)


def resample(x, axis: int, index: np.ndarray, weight: np.ndarray):
    """sum_k weight[o, k] * x[index[o, k]] along `axis`, summed in k order as TF's loops do."""
    total = None
    for k in range(index.shape[1]):
        term = jnp.take(x, index[:, k], axis=axis) * along(weight[:, k], axis)
        total = term if total is None else total + term
    return total


# --- bilinear -------------------------------------------------------------------------------------

def bilinear_taps(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool):
    position = source_positions(out_size, resize_scale(in_size, out_size, align_corners), half_pixel_centers)
    low = np.floor(position)
    return (np.maximum(low, 0).astype(np.int64), np.minimum(np.ceil(position), in_size - 1).astype(np.int64),
            position - low)


def resize_bilinear(images, size, align_corners: bool, half_pixel_centers: bool):
    check_corners(align_corners, half_pixel_centers)
    (top, bottom, y_lerp), (left, right, x_lerp) = (
        bilinear_taps(images.shape[axis], n, align_corners, half_pixel_centers) for axis, n in zip((H, W), size))
    x = images.astype(F32)

    def blend_columns(rows):
        lo, hi = jnp.take(rows, left, axis=W), jnp.take(rows, right, axis=W)
        return lo + (hi - lo) * along(x_lerp, W)
    upper, lower = blend_columns(jnp.take(x, top, axis=H)), blend_columns(jnp.take(x, bottom, axis=H))
    return upper + (lower - upper) * along(y_lerp, H)


@register_op("ResizeBilinear", dtypes=RESIZE_DTYPES, constant_inputs=("size",))
def resize_bilinear_op(ctx, images, size, *, T, align_corners, half_pixel_centers):
    return [resize_bilinear(images, output_size(images, size), align_corners, half_pixel_centers)]


def check_grads(grads, original_shape, original_input: str = "original_image") -> None:
    """A resize gradient's inputs: NHWC grads of the resized images, of the batch and depth of the original."""
    check_rank(grads, "grads", rank=4)
    if len(original_shape) != 4:
        raise InvalidArgument(f"input {original_input!r} has shape {list(original_shape)}; it must have rank 4",
                              input=original_input)
    if (grads.shape[0], grads.shape[3]) != (original_shape[0], original_shape[3]):
        raise InvalidArgument(f"input 'grads' has shape {list(grads.shape)}; its batch and depth must be those of "
                              f"{original_input!r} {list(original_shape)}", input="grads")


def transpose_of(resize, grads, original_shape, dtype):
    """The gradient of a resize (a linear map of the image) with respect to a float32 image."""
    backward = jax.linear_transpose(resize, jax.ShapeDtypeStruct(tuple(original_shape), F32))
    return backward(grads.astype(F32))[0].astype(dtype)


@register_op("ResizeBilinearGrad", dtypes=D.FLOAT)
def resize_bilinear_grad(ctx, grads, original_image, *, T, align_corners, half_pixel_centers):
    check_grads(grads, original_image.shape)
    size = grads.shape[1:3]
    return [transpose_of(lambda x: resize_bilinear(x, size, align_corners, half_pixel_centers), grads,
                         original_image.shape, original_image.dtype)]


# --- nearest neighbour ------------------------------------------------------------------------------

def nearest_indices(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool) -> np.ndarray:
    position = source_positions(out_size, resize_scale(in_size, out_size, align_corners), half_pixel_centers,
                                shift=F32(0))  # TF's nearest-neighbour scaler keeps the half pixel; floor drops it
    index = round_half_away(position) if align_corners else np.floor(position)
    index = np.minimum(index, in_size - 1)
    return (np.maximum(index, 0) if half_pixel_centers else index).astype(np.int64)


def nearest_grid(in_shape, size, align_corners, half_pixel_centers):
    check_corners(align_corners, half_pixel_centers)
    rows, cols = (nearest_indices(in_shape[axis], n, align_corners, half_pixel_centers)
                  for axis, n in zip((H, W), size))
    return rows[:, None], cols[None, :]


@register_op("ResizeNearestNeighbor", dtypes=RESIZE_DTYPES, constant_inputs=("size",))
def resize_nearest(ctx, images, size, *, T, align_corners, half_pixel_centers):
    rows, cols = nearest_grid(images.shape, output_size(images, size), align_corners, half_pixel_centers)
    return [jnp.asarray(images)[:, rows, cols]]


@register_op("ResizeNearestNeighborGrad", dtypes=NEAREST_GRAD_DTYPES, constant_inputs=("size",))
def resize_nearest_grad(ctx, grads, size, *, T, align_corners, half_pixel_centers):
    height, width = output_size(grads, size, "grads")
    rows, cols = nearest_grid((None, height, width), grads.shape[1:3], align_corners, half_pixel_centers)
    return [jnp.zeros((grads.shape[0], height, width, grads.shape[3]), grads.dtype).at[:, rows, cols].add(grads)]


# --- bicubic ---------------------------------------------------------------------------------------

CUBIC_TABLE_SIZE = 1024


@functools.cache
def cubic_coefficients(a: float) -> np.ndarray:
    """TF's table of the cubic convolution kernel at (0..1024)/1024 and 1 more, in float32."""
    a = F32(a)
    x = (np.arange(CUBIC_TABLE_SIZE + 1) / CUBIC_TABLE_SIZE).astype(F32)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    x = x + F32(1)
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.stack([near, far], axis=1).astype(F32)


def bicubic_taps(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool):
    """Four indices and weights per output; with half-pixel centers (Keys' a = -0.5), taps outside the image
    get no weight and the rest are renormalized, else (a = -0.75) border pixels repeat."""
    table = cubic_coefficients(-0.5 if half_pixel_centers else -0.75)
    position = source_positions(out_size, resize_scale(in_size, out_size, align_corners), half_pixel_centers)
    base = np.floor(position)
    offset = np.rint((position - base) * CUBIC_TABLE_SIZE).astype(np.int64)
    weight = np.stack([table[offset, 1], table[offset, 0], table[CUBIC_TABLE_SIZE - offset, 0],
                       table[CUBIC_TABLE_SIZE - offset, 1]], axis=1)
    wanted = base.astype(np.int64)[:, None] + np.arange(-1, 3)
    index = np.clip(wanted, 0, in_size - 1)
    if half_pixel_centers:
        weight = np.where(index == wanted, weight, F32(0))
        total = ((weight[:, 0] + weight[:, 1]) + weight[:, 2]) + weight[:, 3]
        usable = np.abs(total) >= 1000 * np.finfo(F32).tiny
        weight = np.where(usable[:, None], weight * (F32(1) / np.where(usable, total, F32(1)))[:, None], weight)
    return index, weight.astype(F32)


def resize_bicubic(images, size, align_corners: bool, half_pixel_centers: bool):
    check_corners(align_corners, half_pixel_centers)
    rows, cols = (bicubic_taps(images.shape[axis], n, align_corners, half_pixel_centers)
                  for axis, n in zip((H, W), size))
    return resample(resample(images.astype(F32), H, *rows), W, *cols)


@register_op("ResizeBicubic", dtypes=RESIZE_DTYPES, constant_inputs=("size",))
def resize_bicubic_op(ctx, images, size, *, T, align_corners, half_pixel_centers):
    return [resize_bicubic(images, output_size(images, size), align_corners, half_pixel_centers)]


@register_op("ResizeBicubicGrad", dtypes=(np.float32, np.float64))
def resize_bicubic_grad(ctx, grads, original_image, *, T, align_corners, half_pixel_centers):
    check_grads(grads, original_image.shape)
    size = grads.shape[1:3]
    return [transpose_of(lambda x: resize_bicubic(x, size, align_corners, half_pixel_centers), grads,
                         original_image.shape, original_image.dtype)]


# --- area ------------------------------------------------------------------------------------------

def area_taps(in_size: int, out_size: int, scale) -> tuple[np.ndarray, np.ndarray]:
    """Each output averages the input cells its box [o, o + 1) * scale covers, weighted by the overlap."""
    starts, ends, cells = [], [], []
    for o in range(out_size):
        start, end = F32(o) * scale, F32(o + 1) * scale
        first, last = int(np.floor(start)), int(np.ceil(end))
        starts.append(start), ends.append(end), cells.append(range(first, last))
    taps = max(len(c) for c in cells)
    index = np.zeros((out_size, taps), np.int64)
    weight = np.zeros((out_size, taps), F32)
    for o, (start, end, cell) in enumerate(zip(starts, ends, cells)):
        for k, i in enumerate(cell):
            if i < start:
                weight[o, k] = scale if i + 1 > end else F32(i + 1) - start
            else:
                weight[o, k] = end - F32(i) if i + 1 > end else F32(1)
            index[o, k] = min(max(i, 0), in_size - 1)
    return index, weight


@register_op("ResizeArea", dtypes=RESIZE_DTYPES, constant_inputs=("size",))
def resize_area(ctx, images, size, *, T, align_corners):
    out_height, out_width = output_size(images, size)
    y_scale = resize_scale(images.shape[H], out_height, align_corners)
    x_scale = resize_scale(images.shape[W], out_width, align_corners)
    summed = resample(resample(images.astype(F32), W, *area_taps(images.shape[W], out_width, x_scale)), H,
                      *area_taps(images.shape[H], out_height, y_scale))
    return [summed * F32(1.0 / float(y_scale * x_scale))]
