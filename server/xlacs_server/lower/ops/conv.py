"""Convolutions (2-D, 3-D, depthwise) and their backprops, the transposed convolutions of Keras' Conv*Transpose.

A backprop is the transpose of its forward convolution, a linear map, so it is exact by construction and
shares the forward's padding rules.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import InvalidArgument, Unimplemented, check_dtype, check_rank, input_names
from xlacs_server.lower.ops.array import axes
from xlacs_server.lower.ops.nn import channel_axis, check_data_format
from xlacs_server.lower.registry import register_op

HIGHEST = lax.Precision.HIGHEST
CONV_DTYPES = D.FLOAT + (np.int32,)
CONV3D_V1_DTYPES = (np.float16, np.float32, np.float64)


def spatial(values, data_format: str, ndim: int) -> tuple[int, ...]:
    """The spatial entries of a per-dimension attr (strides, dilations) given in data_format order."""
    values = list(values) or [1] * ndim
    return tuple(values[2:] if data_format.startswith("NC") else values[1:-1])


def conv_padding(padding: str, explicit_paddings, data_format: str, ndim: int):
    if padding != "EXPLICIT":
        return padding
    pairs = [tuple(explicit_paddings[i:i + 2]) for i in range(0, len(explicit_paddings), 2)]
    return pairs[2:] if data_format.startswith("NC") else pairs[1:-1]


def per_dimension(values, name: str, ndim: int, data_format: str) -> None:
    """A strides or dilations attr: one positive entry per dimension, 1 for the batch and the channels."""
    if len(values) != ndim or min(values) < 1:
        raise InvalidArgument(f"{name}={list(values)} must have {ndim} entries (one per dimension of {data_format}), "
                              "each at least 1", attr=name)
    if values[0] != 1 or values[channel_axis(data_format, ndim)] != 1:
        raise Unimplemented(f"{name}={list(values)}: {name} in the batch and channel dimensions must be 1", attr=name)


def check_padding(padding: str, explicit_paddings, ndim: int, data_format: str) -> None:
    if padding not in ("SAME", "VALID", "EXPLICIT"):
        raise InvalidArgument(f"padding {padding!r} is not one of SAME, VALID, EXPLICIT", attr="padding")
    if padding != "EXPLICIT":
        if len(explicit_paddings):
            raise InvalidArgument(f"explicit_paddings={list(explicit_paddings)} must be empty unless padding is "
                                  "EXPLICIT", attr="explicit_paddings")
        return
    pairs = [tuple(explicit_paddings[i:i + 2]) for i in range(0, len(explicit_paddings), 2)]
    if len(explicit_paddings) != 2 * ndim or min(explicit_paddings) < 0 or \
            pairs[0] != (0, 0) or pairs[channel_axis(data_format, ndim)] != (0, 0):
        raise InvalidArgument(f"explicit_paddings={list(explicit_paddings)} must hold {2 * ndim} values, a (before, "
                              "after) pair per dimension, none negative, zeros for the batch and the channels",
                              attr="explicit_paddings")


def check_convolution(x, kernel, *, strides, padding, explicit_paddings, data_format, dilations, depthwise) -> None:
    """As TF's convolution kernels: an input of the rank its data_format says (any rank for the generic Conv's
    "NC" and "N"), a filter [spatial..., in, out] (in, multiplier for depthwise) whose input depth divides the
    input's, and strides, dilations and paddings for each dimension."""
    if len(data_format) > 2:
        check_data_format(data_format, ("NHWC", "NCHW", "NDHWC", "NCDHW"))
        check_rank(x, "input", rank=len(data_format))
    check_rank(kernel, "filter", rank=np.ndim(x))
    if kernel.dtype != x.dtype:
        raise InvalidArgument(f"input 'filter' has dtype {np.dtype(kernel.dtype).name}, but the tensor it convolves "
                              f"has {np.dtype(x.dtype).name}", input="filter")
    per_dimension(strides, "strides", x.ndim, data_format)
    if len(dilations):
        per_dimension(dilations, "dilations", x.ndim, data_format)
    check_padding(padding, explicit_paddings, x.ndim, data_format)
    channels, (in_depth, out_depth) = x.shape[channel_axis(data_format, x.ndim)], kernel.shape[-2:]
    if depthwise and in_depth != channels:
        raise InvalidArgument(f"input 'filter' of shape {list(kernel.shape)} is for {in_depth} channels, but 'input' "
                              f"of shape {list(x.shape)} has {channels}", input="filter")
    if not depthwise and (in_depth < 1 or channels % in_depth or out_depth % (channels // in_depth or 1)):
        raise InvalidArgument(f"input 'filter' of shape {list(kernel.shape)} does not fit 'input' of shape "
                              f"{list(x.shape)}: the filter's input depth must divide the input's {channels} channels "
                              "into groups that divide its output depth", input="filter")


def convolve(x, kernel, *, strides, padding, explicit_paddings=(), data_format, dilations, depthwise=False):
    """TF's Conv2D/Conv3D (grouped when the kernel has fewer input channels) or DepthwiseConv2dNative."""
    check_convolution(x, kernel, strides=strides, padding=padding, explicit_paddings=explicit_paddings,
                      data_format=data_format, dilations=dilations, depthwise=depthwise)
    nd = x.ndim - 2
    chars = "DHW"[-nd:]
    lhs = f"NC{chars}" if data_format.startswith("NC") else f"N{chars}C"
    channels = x.shape[channel_axis(data_format, x.ndim)]
    if depthwise:  # [h, w, in, multiplier] is a grouped kernel with one input channel per group
        kernel = jnp.reshape(kernel, kernel.shape[:-2] + (1, kernel.shape[-2] * kernel.shape[-1]))
    return lax.conv_general_dilated(
        x, kernel, window_strides=spatial(strides, data_format, x.ndim),
        padding=conv_padding(padding, explicit_paddings, data_format, x.ndim),
        rhs_dilation=spatial(dilations, data_format, x.ndim), dimension_numbers=(lhs, f"{chars}IO", lhs),
        feature_group_count=channels // kernel.shape[-2], precision=HIGHEST)


def backprop_input(input_shape, filter, out_backprop, **conv):
    spec = jax.ShapeDtypeStruct(tuple(input_shape), out_backprop.dtype)
    check_out_backprop(lambda x: convolve(x, filter, **conv), spec, out_backprop)
    return jax.linear_transpose(lambda x: convolve(x, filter, **conv), spec)(out_backprop)[0]


def backprop_filter(input, filter_shape, out_backprop, **conv):
    spec = jax.ShapeDtypeStruct(tuple(filter_shape), out_backprop.dtype)
    check_out_backprop(lambda k: convolve(input, k, **conv), spec, out_backprop)
    return jax.linear_transpose(lambda k: convolve(input, k, **conv), spec)(out_backprop)[0]


def check_out_backprop(forward, spec, out_backprop) -> None:
    """out_backprop has the shape of the forward convolution's output, as TF's backprop kernels require."""
    expected = jax.eval_shape(forward, spec).shape
    if np.shape(out_backprop) != expected:
        raise InvalidArgument(f"input 'out_backprop' has shape {list(np.shape(out_backprop))}, but the convolution "
                              f"it is the gradient of outputs {list(expected)}", input="out_backprop")


def sizes(value, input: str, ndim: int) -> tuple[int, ...]:
    """An input_sizes or filter_sizes operand: a vector of `ndim` sizes."""
    if np.ndim(value) != 1 or len(value) != ndim or min(value, default=0) < 0:
        raise InvalidArgument(f"input {input!r} holds {np.asarray(value).tolist()}: it must be a vector of {ndim} "
                              "sizes, none negative", input=input)
    return axes(value)


def input_sizes_2d(value, filter, out_backprop, data_format: str) -> tuple[int, ...]:
    """Conv2DBackpropInput's input_sizes: the input's shape or, as TF's kernel also takes, its 2 spatial sizes,
    the batch then coming from out_backprop and the depth from the filter."""
    if np.ndim(value) == 1 and len(value) == 2 and np.ndim(filter) == 4 and np.ndim(out_backprop) == 4:
        batch, depth = out_backprop.shape[0], filter.shape[2]
        value = [batch, depth, *value] if data_format.startswith("NC") else [batch, *value, depth]
    return sizes(value, "input_sizes", 4)


def check_operands(ctx, dtype, *operands) -> None:
    """The tensors a convolution node convolves (its inputs but input_sizes and filter_sizes) are of `dtype`."""
    for name, x in zip([n for n in input_names(ctx.node.op) if not n.endswith("_sizes")], operands):
        check_dtype(x, name, dtype)


@register_op("Conv2D", dtypes=CONV_DTYPES)
def conv2d(ctx, input, filter, *, T, strides, padding, use_cudnn_on_gpu, explicit_paddings, data_format, dilations):
    check_operands(ctx, T, input, filter)
    return [convolve(input, filter, strides=strides, padding=padding, explicit_paddings=explicit_paddings,
                     data_format=data_format, dilations=dilations)]


@register_op("Conv3D", dtypes=D.FLOAT)
def conv3d(ctx, input, filter, *, T, strides, padding, data_format, dilations):
    check_operands(ctx, T, input, filter)
    return [convolve(input, filter, strides=strides, padding=padding, data_format=data_format, dilations=dilations)]


@register_op("DepthwiseConv2dNative", dtypes=D.FLOAT)
def depthwise_conv2d(ctx, input, filter, *, T, strides, padding, explicit_paddings, data_format, dilations):
    check_operands(ctx, T, input, filter)
    return [convolve(input, filter, strides=strides, padding=padding, explicit_paddings=explicit_paddings,
                     data_format=data_format, dilations=dilations, depthwise=True)]


@register_op("Conv", dtypes=CONV_DTYPES)
def conv(ctx, input, filter, *, T, strides, padding, explicit_paddings, data_format, dilations, batch_dims, groups):
    """TF's rank-generic convolution: `batch_dims` leading dimensions, then spatial and channel dimensions.
    The groups follow from the input and filter depths, as in Conv2D."""
    check_data_format(data_format, ("CHANNELS_LAST", "CHANNELS_FIRST"))
    check_operands(ctx, T, input, filter)
    check_rank(filter, "filter", min_rank=3)
    if batch_dims < 1:
        raise InvalidArgument(f"batch_dims={batch_dims} must be at least 1", attr="batch_dims")
    check_rank(input, "input", rank=batch_dims + filter.ndim - 1)
    layout = "NC" if data_format == "CHANNELS_FIRST" else "N"
    batch = input.shape[:batch_dims]
    x = jnp.reshape(input, (-1,) + input.shape[batch_dims:])
    # strides, dilations and explicit_paddings have one entry for all the batch dimensions
    y = convolve(x, filter, strides=strides, padding=padding, explicit_paddings=explicit_paddings,
                 data_format=layout, dilations=dilations)
    return [jnp.reshape(y, batch + y.shape[1:])]


@register_op("Conv2DBackpropInput", dtypes=CONV_DTYPES, constant_inputs=("input_sizes",))
def conv2d_backprop_input(ctx, input_sizes, filter, out_backprop, *, T, strides, padding, use_cudnn_on_gpu,
                          explicit_paddings, data_format, dilations):
    check_operands(ctx, T, filter, out_backprop)
    input_shape = input_sizes_2d(input_sizes, filter, out_backprop, data_format)
    return [backprop_input(input_shape, filter, out_backprop, strides=strides, padding=padding,
                           explicit_paddings=explicit_paddings, data_format=data_format, dilations=dilations)]


@register_op("Conv2DBackpropInputV2", dtypes=CONV_DTYPES)
def conv2d_backprop_input_v2(ctx, input, filter, out_backprop, *, T, strides, padding, use_cudnn_on_gpu,
                             explicit_paddings, data_format, dilations):
    check_operands(ctx, T, input, filter, out_backprop)
    return [backprop_input(input.shape, filter, out_backprop, strides=strides, padding=padding,
                           explicit_paddings=explicit_paddings, data_format=data_format, dilations=dilations)]


@register_op("Conv2DBackpropFilter", dtypes=D.FLOAT, constant_inputs=("filter_sizes",))
def conv2d_backprop_filter(ctx, input, filter_sizes, out_backprop, *, T, strides, padding, use_cudnn_on_gpu,
                           explicit_paddings, data_format, dilations):
    check_operands(ctx, T, input, out_backprop)
    shape = sizes(filter_sizes, "filter_sizes", 4)
    return [backprop_filter(input, shape, out_backprop, strides=strides, padding=padding,
                            explicit_paddings=explicit_paddings, data_format=data_format, dilations=dilations)]


@register_op("Conv2DBackpropFilterV2", dtypes=D.FLOAT)
def conv2d_backprop_filter_v2(ctx, input, filter, out_backprop, *, T, strides, padding, use_cudnn_on_gpu,
                              explicit_paddings, data_format, dilations):
    check_operands(ctx, T, input, filter, out_backprop)
    return [backprop_filter(input, filter.shape, out_backprop, strides=strides, padding=padding,
                            explicit_paddings=explicit_paddings, data_format=data_format, dilations=dilations)]


@register_op("Conv3DBackpropInputV2", dtypes=D.FLOAT, constant_inputs=("input_sizes",))
def conv3d_backprop_input_v2(ctx, input_sizes, filter, out_backprop, *, T, strides, padding, data_format, dilations,
                             Tshape):
    check_operands(ctx, T, filter, out_backprop)
    shape = sizes(input_sizes, "input_sizes", 5)
    return [backprop_input(shape, filter, out_backprop, strides=strides, padding=padding,
                           data_format=data_format, dilations=dilations)]


@register_op("Conv3DBackpropInput", dtypes=CONV3D_V1_DTYPES)
def conv3d_backprop_input(ctx, input, filter, out_backprop, *, T, strides, padding, dilations):
    check_operands(ctx, T, input, filter, out_backprop)
    return [backprop_input(input.shape, filter, out_backprop, strides=strides, padding=padding,
                           data_format="NDHWC", dilations=dilations)]


@register_op("Conv3DBackpropFilterV2", dtypes=D.FLOAT, constant_inputs=("filter_sizes",))
def conv3d_backprop_filter_v2(ctx, input, filter_sizes, out_backprop, *, T, strides, padding, data_format, dilations):
    check_operands(ctx, T, input, out_backprop)
    shape = sizes(filter_sizes, "filter_sizes", 5)
    return [backprop_filter(input, shape, out_backprop, strides=strides, padding=padding,
                            data_format=data_format, dilations=dilations)]


@register_op("Conv3DBackpropFilter", dtypes=CONV3D_V1_DTYPES)
def conv3d_backprop_filter(ctx, input, filter, out_backprop, *, T, strides, padding, dilations):
    check_operands(ctx, T, input, filter, out_backprop)
    return [backprop_filter(input, filter.shape, out_backprop, strides=strides, padding=padding,
                            data_format="NDHWC", dilations=dilations)]


@register_op("DepthwiseConv2dNativeBackpropInput", dtypes=D.FLOAT, constant_inputs=("input_sizes",))
def depthwise_backprop_input(ctx, input_sizes, filter, out_backprop, *, T, strides, padding, explicit_paddings,
                             data_format, dilations):
    check_operands(ctx, T, filter, out_backprop)
    shape = sizes(input_sizes, "input_sizes", 4)
    return [backprop_input(shape, filter, out_backprop, strides=strides, padding=padding,
                           explicit_paddings=explicit_paddings, data_format=data_format, dilations=dilations,
                           depthwise=True)]


@register_op("DepthwiseConv2dNativeBackpropFilter", dtypes=D.FLOAT, constant_inputs=("filter_sizes",))
def depthwise_backprop_filter(ctx, input, filter_sizes, out_backprop, *, T, strides, padding, explicit_paddings,
                              data_format, dilations):
    check_operands(ctx, T, input, out_backprop)
    shape = sizes(filter_sizes, "filter_sizes", 4)
    return [backprop_filter(input, shape, out_backprop, strides=strides, padding=padding,
                            explicit_paddings=explicit_paddings, data_format=data_format, dilations=dilations,
                            depthwise=True)]
