"""XLA:CPU overrides, each found by measurement (numbers in docs/performance.md).

XLA:CPU runs a depthwise convolution lowered as a grouped convolution (feature_group_count = channels)
about 30x slower than the same computation written as k*k shifted, strided multiply-adds, which XLA
fuses into one loop. MobileNetV2 and EfficientNetB0 spend most of their time there.
"""
import jax.numpy as jnp
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.ops.conv import check_convolution, check_operands, conv_padding, spatial
from xlacs_server.lower.registry import register_op


def depthwise_shifted(x, kernel, *, strides, padding, dilations):
    """NHWC depthwise convolution as a sum of kh*kw shifted multiply-adds; kernel is [kh, kw, C, M]."""
    n, h, w, c = x.shape
    kh, kw, _, multiplier = kernel.shape
    (sh, sw), (dh, dw) = strides, dilations
    if isinstance(padding, str):
        padding = lax.padtype_to_pads((h, w), ((kh - 1) * dh + 1, (kw - 1) * dw + 1), (sh, sw), padding)
    x = jnp.pad(x, [(0, 0), *padding, (0, 0)])
    out_h = (x.shape[1] - (kh - 1) * dh - 1) // sh + 1
    out_w = (x.shape[2] - (kw - 1) * dw - 1) // sw + 1
    total = None
    for i in range(kh):
        for j in range(kw):
            window = lax.slice(x, (0, i * dh, j * dw, 0),
                               (n, i * dh + (out_h - 1) * sh + 1, j * dw + (out_w - 1) * sw + 1, c), (1, sh, sw, 1))
            term = window[..., None] * kernel[i, j]  # [n, oh, ow, c, m]
            total = term if total is None else total + term
    return jnp.reshape(total, (n, out_h, out_w, c * multiplier))


@register_op("DepthwiseConv2dNative", dtypes=D.FLOAT, platform="cpu")
def depthwise_conv2d_cpu(ctx, input, filter, *, T, strides, padding, explicit_paddings, data_format, dilations):
    check_operands(ctx, T, input, filter)
    check_convolution(input, filter, strides=strides, padding=padding, explicit_paddings=explicit_paddings,
                      data_format=data_format, dilations=dilations, depthwise=True)
    nchw = data_format.startswith("NC")
    x = jnp.transpose(input, (0, 2, 3, 1)) if nchw else input
    y = depthwise_shifted(x, filter, strides=spatial(strides, data_format, 4),
                          padding=conv_padding(padding, explicit_paddings, data_format, 4),
                          dilations=spatial(dilations, data_format, 4))
    return [jnp.transpose(y, (0, 3, 1, 2)) if nchw else y]
