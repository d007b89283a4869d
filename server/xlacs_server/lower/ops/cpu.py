"""XLA:CPU overrides, each found by measurement (numbers in docs/performance.md).

XLA:CPU runs a depthwise convolution lowered as a grouped convolution (feature_group_count = channels)
about 30x slower than the same computation written as k*k shifted, strided multiply-adds, which XLA
fuses into one loop. MobileNetV2 and EfficientNetB0 spend most of their time there, and ConvNeXt in its 7x7
Conv2D with one input channel per group (Keras' Conv2D(groups=channels)), a depthwise convolution too. Other grouped
convolutions (ResNeXt's) run faster as one convolution per group. Its reduce_window is a
naive loop nest too: max and average pooling written as a max or sum of the window's shifted slices run 1.6-9x
faster (InceptionV3 pools 13 times).
"""
import functools
import itertools

import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.ops.conv import (CONV_DTYPES, check_convolution, check_operands, conv2d, conv_padding, convolve,
                                         spatial)
from xlacs_server.lower.ops.nn import channel_axis
from xlacs_server.lower.ops.pool import MAX_POOL_DTYPES, avg_pool, geometry, max_pool, operands
from xlacs_server.lower.registry import register_op

# Pooling windows up to this many elements become shifted slices (measured up to 8x8, every size faster); a
# larger window stays a reduce_window, since each element of it is a slice for XLA to compile.
MAX_SHIFTED_WINDOW = 64
# A grouped convolution of up to MAX_SPLIT_GROUPS groups of at least MIN_SPLIT_GROUP_CHANNELS input channels each runs
# as one convolution per group: 1.3-1.9x faster than XLA:CPU's grouped convolution at 8 and 32 groups of 4-32 channels,
# as fast at 7x7x1024, slower at 2 channels a group (docs/performance.md); more groups were not measured.
MAX_SPLIT_GROUPS = 32
MIN_SPLIT_GROUP_CHANNELS = 4


def shifted_windows(x, window, strides, dilations):
    """(offset, slice) for each offset of the window, the slice holding that element of every window of the
    already padded x."""
    out = [(n - (k - 1) * d - 1) // s + 1 for n, k, s, d in zip(x.shape, window, strides, dilations)]
    for offset in itertools.product(*map(range, window)):
        start = [i * d for i, d in zip(offset, dilations)]
        yield offset, lax.slice(x, start, [b + (o - 1) * s + 1 for b, o, s in zip(start, out, strides)], strides)


def shifted_reduce_window(x, init, computation, window, strides, pads):
    """lax.reduce_window as `computation` over the window's shifted slices, which XLA fuses into one loop."""
    if np.prod(window) > MAX_SHIFTED_WINDOW:
        return lax.reduce_window(x, init, computation, window, strides, pads)
    x = lax.pad(x, init, [(before, after, 0) for before, after in pads])
    return functools.reduce(computation, (s for _, s in shifted_windows(x, window, strides, (1,) * x.ndim)))


def depthwise_shifted(x, kernel, *, strides, padding, dilations):
    """NHWC depthwise convolution as a sum of kh*kw shifted multiply-adds; kernel is [kh, kw, C, M]."""
    _, h, w, c = x.shape
    kh, kw, _, multiplier = kernel.shape
    (sh, sw), (dh, dw) = strides, dilations
    if isinstance(padding, str):
        padding = lax.padtype_to_pads((h, w), ((kh - 1) * dh + 1, (kw - 1) * dw + 1), (sh, sw), padding)
    x = lax.pad(x, np.zeros((), x.dtype), [(0, 0, 0), *[(lo, hi, 0) for lo, hi in padding], (0, 0, 0)])

    # lax rather than jnp's indexing and broadcasting: the same program, traced in 0.44-0.88x the time (each jnp
    # call is a function traced once per shape, and a MobileNet has tens of these rules of kh*kw terms each).
    def term(i, j, window):  # window[..., None] * kernel[i, j]: [n, oh, ow, c, m]
        shape = (*window.shape, multiplier)
        tap = lax.reshape(lax.slice(kernel, (i, j, 0, 0), (i + 1, j + 1, c, multiplier)), (c, multiplier))
        return lax.mul(lax.broadcast_in_dim(window, shape, (0, 1, 2, 3)), lax.broadcast_in_dim(tap, shape, (3, 4)))

    total = functools.reduce(lax.add, (term(i, j, window) for (_, i, j, _), window in
                                       shifted_windows(x, (1, kh, kw, 1), (1, sh, sw, 1), (1, dh, dw, 1))))
    return lax.reshape(total, (*total.shape[:3], c * multiplier))


@register_op("DepthwiseConv2dNative", dtypes=D.FLOAT, platform="cpu")
def depthwise_conv2d_cpu(ctx, input, filter, *, T, strides, padding, explicit_paddings, data_format, dilations):
    check_operands(ctx, T, input, filter)
    check_convolution(input, filter, strides=strides, padding=padding, explicit_paddings=explicit_paddings,
                      data_format=data_format, dilations=dilations, depthwise=True)
    return [_depthwise(input, filter, strides=strides, padding=padding, explicit_paddings=explicit_paddings,
                       data_format=data_format, dilations=dilations)]


@register_op("Conv2D", dtypes=CONV_DTYPES, platform="cpu")
def conv2d_cpu(ctx, input, filter, *, T, strides, padding, use_cudnn_on_gpu, explicit_paddings, data_format,
               dilations):
    """A grouped float Conv2D: with one input channel per group (filter [h, w, 1, channels * m]) a depthwise
    convolution with the filter [h, w, channels, m]; with MIN_SPLIT_GROUP_CHANNELS or more, in up to MAX_SPLIT_GROUPS
    groups, one ungrouped convolution per group, concatenated. Any other Conv2D is the generic rule's."""
    rank_4 = np.ndim(input) == 4 and np.ndim(filter) == 4  # other ranks: the generic rule refuses them
    channels, per_group = (input.shape[channel_axis(data_format, 4)], filter.shape[2]) if rank_4 else (0, 0)
    groups = channels // per_group if per_group else 1
    depthwise = per_group == 1
    split = per_group >= MIN_SPLIT_GROUP_CHANNELS and groups <= MAX_SPLIT_GROUPS
    if T not in D.FLOAT or groups == 1 or not (depthwise or split):
        return conv2d(ctx, input, filter, T=T, strides=strides, padding=padding, use_cudnn_on_gpu=use_cudnn_on_gpu,
                      explicit_paddings=explicit_paddings, data_format=data_format, dilations=dilations)
    check_operands(ctx, T, input, filter)
    conv = dict(strides=strides, padding=padding, explicit_paddings=explicit_paddings, data_format=data_format,
                dilations=dilations)
    check_convolution(input, filter, **conv, depthwise=False)
    if depthwise:
        kernel = jnp.reshape(filter, (*filter.shape[:2], channels, filter.shape[3] // channels))
        return [_depthwise(input, kernel, **conv)]
    axis = channel_axis(data_format, 4)
    return [jnp.concatenate([convolve(x, w, **conv) for x, w in
                             zip(jnp.split(input, groups, axis), jnp.split(filter, groups, 3))], axis)]


def _depthwise(input, kernel, *, strides, padding, explicit_paddings, data_format, dilations):
    nchw = data_format.startswith("NC")
    x = jnp.transpose(input, (0, 2, 3, 1)) if nchw else input
    y = depthwise_shifted(x, kernel, strides=spatial(strides, data_format, 4),
                          padding=conv_padding(padding, explicit_paddings, data_format, 4),
                          dilations=spatial(dilations, data_format, 4))
    return jnp.transpose(y, (0, 3, 1, 2)) if nchw else y


@register_op("MaxPool", dtypes=MAX_POOL_DTYPES, platform="cpu")
def max_pool_cpu(ctx, input, *, T, ksize, strides, padding, explicit_paddings, data_format):
    operands(T, input=input)
    return [max_pool(input, *geometry(input.shape, ksize, strides, padding, explicit_paddings, data_format=data_format,
                                      rank=4), reduce_window=shifted_reduce_window)]


@register_op("MaxPoolV2", dtypes=MAX_POOL_DTYPES, constant_inputs=("ksize", "strides"), platform="cpu")
def max_pool_v2_cpu(ctx, input, ksize, strides, *, T, padding, data_format):
    operands(T, input=input)
    return [max_pool(input, *geometry(input.shape, ksize, strides, padding, data_format=data_format, rank=4,
                                      window_inputs=True), reduce_window=shifted_reduce_window)]


@register_op("AvgPool", dtypes=D.FLOAT, platform="cpu")
def avg_pool_cpu(ctx, value, *, T, ksize, strides, padding, data_format):
    operands(T, value=value)
    return [avg_pool(value, *geometry(value.shape, ksize, strides, padding, data_format=data_format, rank=4,
                                      input="value"), reduce_window=shifted_reduce_window)]
