"""Convolutions (2-D, 3-D, depthwise) and their backprops, the transposed convolutions of Keras' Conv*Transpose.

A backprop is the transpose of its forward convolution, a linear map, so it is exact by construction and
shares the forward's padding rules.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.ops.array import axes
from xlacs_server.lower.ops.nn import channel_axis
from xlacs_server.lower.registry import register_op

HIGHEST = lax.Precision.HIGHEST
CONV_DTYPES = D.FLOAT + (np.int32,)
CONV3D_V1_DTYPES = (np.float16, np.float32, np.float64)
DILATIONS_2D, DILATIONS_3D = (1,) * 4, (1,) * 5


def spatial(values, data_format: str, ndim: int) -> tuple[int, ...]:
    """The spatial entries of a per-dimension attr (strides, dilations) given in data_format order."""
    values = list(values) or [1] * ndim
    return tuple(values[2:] if data_format.startswith("NC") else values[1:-1])


def conv_padding(padding: str, explicit_paddings, data_format: str, ndim: int):
    if padding != "EXPLICIT":
        return padding
    pairs = [tuple(explicit_paddings[i:i + 2]) for i in range(0, len(explicit_paddings), 2)]
    return pairs[2:] if data_format.startswith("NC") else pairs[1:-1]


def convolve(x, kernel, *, strides, padding, explicit_paddings=(), data_format, dilations, depthwise=False):
    """TF's Conv2D/Conv3D (grouped when the kernel has fewer input channels) or DepthwiseConv2dNative."""
    nd = x.ndim - 2
    chars = "DHW"[-nd:]
    lhs = f"NC{chars}" if data_format.startswith("NC") else f"N{chars}C"
    channels = x.shape[channel_axis(data_format, x.ndim)]
    if depthwise:  # [h, w, in, multiplier] is a grouped kernel with one input channel per group
        kernel = jnp.reshape(kernel, kernel.shape[:-2] + (1, kernel.shape[-2] * kernel.shape[-1]))
    if channels % kernel.shape[-2]:
        raise ValueError(f"input depth {channels} is not a multiple of the filter's input depth {kernel.shape[-2]}")
    return lax.conv_general_dilated(
        x, kernel, window_strides=spatial(strides, data_format, x.ndim),
        padding=conv_padding(padding, explicit_paddings, data_format, x.ndim),
        rhs_dilation=spatial(dilations, data_format, x.ndim), dimension_numbers=(lhs, f"{chars}IO", lhs),
        feature_group_count=channels // kernel.shape[-2], precision=HIGHEST)


def backprop_input(input_shape, filter, out_backprop, **conv):
    forward = jax.linear_transpose(lambda x: convolve(x, filter, **conv),
                                   jax.ShapeDtypeStruct(tuple(input_shape), out_backprop.dtype))
    return forward(out_backprop)[0]


def backprop_filter(input, filter_shape, out_backprop, **conv):
    forward = jax.linear_transpose(lambda k: convolve(input, k, **conv),
                                   jax.ShapeDtypeStruct(tuple(filter_shape), out_backprop.dtype))
    return forward(out_backprop)[0]


@register_op("Conv2D", dtypes=CONV_DTYPES)
def conv2d(ctx, input, filter, *, T, strides, padding, use_cudnn_on_gpu=True, explicit_paddings=(),
           data_format="NHWC", dilations=DILATIONS_2D):
    return [convolve(input, filter, strides=strides, padding=padding, explicit_paddings=explicit_paddings,
                     data_format=data_format, dilations=dilations)]


@register_op("Conv3D", dtypes=D.FLOAT)
def conv3d(ctx, input, filter, *, T, strides, padding, data_format="NDHWC", dilations=DILATIONS_3D):
    return [convolve(input, filter, strides=strides, padding=padding, data_format=data_format, dilations=dilations)]


@register_op("DepthwiseConv2dNative", dtypes=D.FLOAT)
def depthwise_conv2d(ctx, input, filter, *, T, strides, padding, explicit_paddings=(), data_format="NHWC",
                     dilations=DILATIONS_2D):
    return [convolve(input, filter, strides=strides, padding=padding, explicit_paddings=explicit_paddings,
                     data_format=data_format, dilations=dilations, depthwise=True)]


@register_op("Conv", dtypes=CONV_DTYPES)
def conv(ctx, input, filter, *, T, strides, padding, explicit_paddings=(), data_format="CHANNELS_LAST",
         dilations=(), batch_dims=1, groups=1):
    """TF's rank-generic convolution: `batch_dims` leading dimensions, then spatial and channel dimensions.
    The groups follow from the input and filter depths, as in Conv2D."""
    if data_format not in ("CHANNELS_LAST", "CHANNELS_FIRST"):
        raise ValueError(f"data_format {data_format!r} is not CHANNELS_LAST or CHANNELS_FIRST")
    layout = "NC" if data_format == "CHANNELS_FIRST" else "N"
    batch = input.shape[:batch_dims]
    x = jnp.reshape(input, (-1,) + input.shape[batch_dims:])
    # strides, dilations and explicit_paddings have one entry for all the batch dimensions
    y = convolve(x, filter, strides=strides, padding=padding, explicit_paddings=explicit_paddings,
                 data_format=layout, dilations=dilations)
    return [jnp.reshape(y, batch + y.shape[1:])]


@register_op("Conv2DBackpropInput", dtypes=CONV_DTYPES, constant_inputs=("input_sizes",))
def conv2d_backprop_input(ctx, input_sizes, filter, out_backprop, *, T, strides, padding, use_cudnn_on_gpu=True,
                          explicit_paddings=(), data_format="NHWC", dilations=DILATIONS_2D):
    return [backprop_input(axes(input_sizes), filter, out_backprop, strides=strides, padding=padding,
                           explicit_paddings=explicit_paddings, data_format=data_format, dilations=dilations)]


@register_op("Conv2DBackpropInputV2", dtypes=CONV_DTYPES)
def conv2d_backprop_input_v2(ctx, input, filter, out_backprop, *, T, strides, padding, use_cudnn_on_gpu=True,
                             explicit_paddings=(), data_format="NHWC", dilations=DILATIONS_2D):
    return [backprop_input(input.shape, filter, out_backprop, strides=strides, padding=padding,
                           explicit_paddings=explicit_paddings, data_format=data_format, dilations=dilations)]


@register_op("Conv2DBackpropFilter", dtypes=D.FLOAT, constant_inputs=("filter_sizes",))
def conv2d_backprop_filter(ctx, input, filter_sizes, out_backprop, *, T, strides, padding, use_cudnn_on_gpu=True,
                           explicit_paddings=(), data_format="NHWC", dilations=DILATIONS_2D):
    return [backprop_filter(input, axes(filter_sizes), out_backprop, strides=strides, padding=padding,
                            explicit_paddings=explicit_paddings, data_format=data_format, dilations=dilations)]


@register_op("Conv2DBackpropFilterV2", dtypes=D.FLOAT)
def conv2d_backprop_filter_v2(ctx, input, filter, out_backprop, *, T, strides, padding, use_cudnn_on_gpu=True,
                              explicit_paddings=(), data_format="NHWC", dilations=DILATIONS_2D):
    return [backprop_filter(input, filter.shape, out_backprop, strides=strides, padding=padding,
                            explicit_paddings=explicit_paddings, data_format=data_format, dilations=dilations)]


@register_op("Conv3DBackpropInputV2", dtypes=D.FLOAT, constant_inputs=("input_sizes",))
def conv3d_backprop_input_v2(ctx, input_sizes, filter, out_backprop, *, T, strides, padding, data_format="NDHWC",
                             dilations=DILATIONS_3D, Tshape=np.dtype(np.int32)):
    return [backprop_input(axes(input_sizes), filter, out_backprop, strides=strides, padding=padding,
                           data_format=data_format, dilations=dilations)]


@register_op("Conv3DBackpropInput", dtypes=CONV3D_V1_DTYPES)
def conv3d_backprop_input(ctx, input, filter, out_backprop, *, T, strides, padding, dilations=DILATIONS_3D):
    return [backprop_input(input.shape, filter, out_backprop, strides=strides, padding=padding,
                           data_format="NDHWC", dilations=dilations)]


@register_op("Conv3DBackpropFilterV2", dtypes=D.FLOAT, constant_inputs=("filter_sizes",))
def conv3d_backprop_filter_v2(ctx, input, filter_sizes, out_backprop, *, T, strides, padding, data_format="NDHWC",
                              dilations=DILATIONS_3D):
    return [backprop_filter(input, axes(filter_sizes), out_backprop, strides=strides, padding=padding,
                            data_format=data_format, dilations=dilations)]


@register_op("Conv3DBackpropFilter", dtypes=CONV3D_V1_DTYPES)
def conv3d_backprop_filter(ctx, input, filter, out_backprop, *, T, strides, padding, dilations=DILATIONS_3D):
    return [backprop_filter(input, filter.shape, out_backprop, strides=strides, padding=padding,
                            data_format="NDHWC", dilations=dilations)]


@register_op("DepthwiseConv2dNativeBackpropInput", dtypes=D.FLOAT, constant_inputs=("input_sizes",))
def depthwise_backprop_input(ctx, input_sizes, filter, out_backprop, *, T, strides, padding, explicit_paddings=(),
                             data_format="NHWC", dilations=DILATIONS_2D):
    return [backprop_input(axes(input_sizes), filter, out_backprop, strides=strides, padding=padding,
                           explicit_paddings=explicit_paddings, data_format=data_format, dilations=dilations,
                           depthwise=True)]


@register_op("DepthwiseConv2dNativeBackpropFilter", dtypes=D.FLOAT, constant_inputs=("filter_sizes",))
def depthwise_backprop_filter(ctx, input, filter_sizes, out_backprop, *, T, strides, padding, explicit_paddings=(),
                              data_format="NHWC", dilations=DILATIONS_2D):
    return [backprop_filter(input, axes(filter_sizes), out_backprop, strides=strides, padding=padding,
                            explicit_paddings=explicit_paddings, data_format=data_format, dilations=dilations,
                            depthwise=True)]
