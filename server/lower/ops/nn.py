"""Neural-network ops: activations, bias, softmax, convolutions, pooling, batch norm."""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.registry import register_op

HIGHEST = lax.Precision.HIGHEST


@register_op("Relu", dtypes=D.REAL)
def relu(ctx, features, *, T):
    return [jnp.maximum(features, jnp.zeros((), features.dtype))]


@register_op("Relu6", dtypes=D.REAL)
def relu6(ctx, features, *, T):
    return [jnp.clip(features, jnp.zeros((), features.dtype), jnp.full((), 6, features.dtype))]


@register_op("Softmax", dtypes=D.FLOAT)
def softmax(ctx, logits, *, T):
    return [jax.nn.softmax(logits, axis=-1)]


def channel_axis(data_format: str, ndim: int) -> int:
    return 1 if data_format.startswith("NC") else ndim - 1


@register_op("BiasAdd", dtypes=D.NUMERIC)
def bias_add(ctx, value, bias, *, T, data_format="NHWC"):
    shape = [1] * value.ndim
    shape[channel_axis(data_format, value.ndim)] = bias.shape[0]
    return [value + jnp.reshape(bias, shape)]


def spatial(values, data_format: str, ndim: int) -> tuple[int, ...]:
    """The spatial entries of a per-dimension attr (strides, dilations, ksize) given in data_format order."""
    values = list(values) or [1] * ndim
    return tuple(values[2:] if data_format.startswith("NC") else values[1:-1])


def conv_padding(padding: str, explicit_paddings, data_format: str, ndim: int):
    if padding != "EXPLICIT":
        return padding
    pairs = [tuple(explicit_paddings[i:i + 2]) for i in range(0, len(explicit_paddings), 2)]
    return pairs[2:] if data_format.startswith("NC") else pairs[1:-1]


def conv(x, kernel, *, strides, padding, dilations, data_format, feature_group_count=1):
    nd = x.ndim - 2
    spatial_chars = "DHW"[-nd:]
    lhs = f"NC{spatial_chars}" if data_format.startswith("NC") else f"N{spatial_chars}C"
    return lax.conv_general_dilated(
        x, kernel, window_strides=strides, padding=padding, rhs_dilation=dilations,
        dimension_numbers=(lhs, f"{spatial_chars}IO", lhs), feature_group_count=feature_group_count,
        precision=HIGHEST)


@register_op("Conv2D", dtypes=D.FLOAT + (np.int32,))
def conv2d(ctx, x, filter, *, T, strides, padding, use_cudnn_on_gpu=True, explicit_paddings=(),
           data_format="NHWC", dilations=(1, 1, 1, 1)):
    return [conv(x, filter, strides=spatial(strides, data_format, 4),
                 padding=conv_padding(padding, explicit_paddings, data_format, 4),
                 dilations=spatial(dilations, data_format, 4), data_format=data_format,
                 feature_group_count=x.shape[channel_axis(data_format, 4)] // filter.shape[2])]


@register_op("DepthwiseConv2dNative", dtypes=D.FLOAT)
def depthwise_conv2d(ctx, x, filter, *, T, strides, padding, explicit_paddings=(), data_format="NHWC",
                     dilations=(1, 1, 1, 1)):
    h, w, channels, multiplier = filter.shape
    return [conv(x, jnp.reshape(filter, (h, w, 1, channels * multiplier)), strides=spatial(strides, data_format, 4),
                 padding=conv_padding(padding, explicit_paddings, data_format, 4),
                 dilations=spatial(dilations, data_format, 4), data_format=data_format,
                 feature_group_count=channels)]


def window(values, data_format: str, ndim: int) -> tuple[int, ...]:
    """A per-dimension attr in data_format order as a full window over every dimension."""
    values = tuple(values)
    return values if len(values) == ndim else (1, *values, 1)


def pool_padding(padding, x_shape, ksize, strides):
    return lax.padtype_to_pads(x_shape, ksize, strides, padding) if isinstance(padding, str) else padding


@register_op("MaxPool", dtypes=D.REAL)
def max_pool(ctx, input, *, T, ksize, strides, padding, explicit_paddings=(), data_format="NHWC"):
    ksize, strides = window(ksize, data_format, input.ndim), window(strides, data_format, input.ndim)
    if padding == "EXPLICIT":
        padding = [tuple(explicit_paddings[i:i + 2]) for i in range(0, len(explicit_paddings), 2)]
    init = -jnp.inf if jnp.issubdtype(input.dtype, jnp.floating) else jnp.iinfo(input.dtype).min
    return [lax.reduce_window(input, jnp.asarray(init, input.dtype), lax.max, ksize, strides,
                              pool_padding(padding, input.shape, ksize, strides))]


@register_op("AvgPool", dtypes=D.FLOAT)
def avg_pool(ctx, value, *, T, ksize, strides, padding, data_format="NHWC"):
    ksize, strides = window(ksize, data_format, value.ndim), window(strides, data_format, value.ndim)
    pads = pool_padding(padding, value.shape, ksize, strides)
    total = lax.reduce_window(value, jnp.zeros((), value.dtype), lax.add, ksize, strides, pads)
    # TF averages over the window's elements inside the input, not the padding.
    count = lax.reduce_window(jnp.ones(value.shape, value.dtype), jnp.zeros((), value.dtype), lax.add,
                              ksize, strides, pads)
    return [total / count]


@register_op("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", dtypes=D.FLOAT)
def fused_batch_norm(ctx, x, scale, offset, mean, variance, *, T, U=np.dtype(np.float32), epsilon=1e-4,
                     exponential_avg_factor=1.0, data_format="NHWC", is_training=True):
    axis = channel_axis(data_format, x.ndim)
    reduce_axes = tuple(a for a in range(x.ndim) if a != axis)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    xf = x.astype(scale.dtype)
    if is_training:
        mean = jnp.mean(xf, axis=reduce_axes)
        variance = jnp.var(xf, axis=reduce_axes)
    y = (xf - jnp.reshape(mean, shape)) * jnp.reshape(lax.rsqrt(variance + epsilon) * scale, shape) \
        + jnp.reshape(offset, shape)
    outputs = [y.astype(x.dtype), mean, variance, mean, variance, variance]
    return outputs[:6 if ctx.node.op == "FusedBatchNormV3" else 5]
