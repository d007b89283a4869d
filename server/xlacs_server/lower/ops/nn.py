"""Neural-network ops: activations, bias, softmax and cross-entropy, local response and batch normalization."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import (InvalidArgument, broadcast_shape, check_dtype, check_dtypes, check_rank,
                                       input_names)
from xlacs_server.lower.registry import register_op

LRN_DTYPES = (np.float16, ml_dtypes.bfloat16, np.float32)
BATCH_NORM_DTYPES = LRN_DTYPES
FUSED_BATCH_NORM_FORMATS = {"FusedBatchNorm": ("NHWC", "NCHW"), "FusedBatchNormV2": ("NHWC", "NCHW"),
                            "FusedBatchNormV3": ("NHWC", "NCHW", "NDHWC", "NCDHW")}
# SELU's constants, as TF spells them (Klambauer et al., 2017).
SELU_SCALE = 1.0507009873554804934193349852946
SELU_ALPHA = 1.6732632423543772848170429916717


def zero(x):
    return jnp.zeros((), x.dtype)


@register_op("Relu", dtypes=D.REAL)
def relu(ctx, features, *, T):
    check_dtype(features, "features", T)
    return [jnp.maximum(features, zero(features))]


@register_op("Relu6", dtypes=D.REAL)
def relu6(ctx, features, *, T):
    check_dtype(features, "features", T)
    return [jnp.clip(features, zero(features), jnp.full((), 6, features.dtype))]


# TF's kernels compute exp(x) - 1, not expm1(x), which differs near zero.

@register_op("Elu", dtypes=D.FLOAT)
def elu(ctx, features, *, T):
    check_dtype(features, "features", T)
    return [jnp.where(features < 0, jnp.exp(features) - 1, features)]


@register_op("Selu", dtypes=D.FLOAT)
def selu(ctx, features, *, T):
    check_dtype(features, "features", T)
    scale, scale_alpha = jnp.asarray(SELU_SCALE, T), jnp.asarray(SELU_SCALE * SELU_ALPHA, T)
    return [jnp.where(features < 0, scale_alpha * (jnp.exp(features) - 1), scale * features)]


@register_op("LeakyRelu", dtypes=D.FLOAT)
def leaky_relu(ctx, features, *, T, alpha):
    # A select, not max(x, alpha * x): alpha may exceed 1.
    check_dtype(features, "features", T)
    return [jnp.where(features > 0, features, features * jnp.asarray(alpha, features.dtype))]


@register_op("Softmax", dtypes=D.FLOAT)
def softmax(ctx, logits, *, T):
    check_logits(logits, T)
    return [jax.nn.softmax(logits, axis=-1)]


@register_op("LogSoftmax", dtypes=D.FLOAT)
def log_softmax(ctx, logits, *, T):
    check_logits(logits, T)
    return [jax.nn.log_softmax(logits, axis=-1)]


def check_logits(logits, dtype) -> None:
    check_dtype(logits, "logits", dtype)
    check_rank(logits, "logits", min_rank=1)


def softmax_parts(logits):
    """(logits - max, log-sum-exp of that): log_softmax is their difference, as TF computes it."""
    shifted = logits - jnp.max(logits, axis=-1, keepdims=True)
    log_sum = jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))
    return shifted, log_sum


@register_op("SoftmaxCrossEntropyWithLogits", dtypes=D.FLOAT)
def softmax_cross_entropy(ctx, features, labels, *, T):
    check_dtypes(ctx.node.op, (features, labels), T)
    shape = broadcast_shape(np.shape(features), np.shape(labels), inputs=("features", "labels"))
    if len(shape) != 2:
        raise InvalidArgument(f"inputs 'features' {list(np.shape(features))} and 'labels' {list(np.shape(labels))} "
                              "must be matrices, or broadcast to one", input="features")
    features, labels = jnp.broadcast_arrays(features, labels)
    shifted, log_sum = softmax_parts(features)
    loss = jnp.sum(labels * (log_sum - shifted), axis=-1)
    return [loss, jnp.exp(shifted - log_sum) - labels]


@register_op("SparseSoftmaxCrossEntropyWithLogits", dtypes=D.FLOAT)
def sparse_softmax_cross_entropy(ctx, features, labels, *, T, Tlabels):
    check_dtype(features, "features", T)
    check_dtype(labels, "labels", Tlabels, "Tlabels")
    check_rank(features, "features", rank=2)
    check_rank(labels, "labels", rank=1)
    if labels.shape[0] != features.shape[0]:
        raise InvalidArgument(f"input 'labels' has {labels.shape[0]} labels, but 'features' has {features.shape[0]} "
                              "rows: give one label per row", input="labels")
    classes = features.shape[-1]
    shifted, log_sum = softmax_parts(features)
    hot = labels[:, None] == lax.broadcasted_iota(labels.dtype, features.shape, 1)
    loss = jnp.sum(jnp.where(hot, log_sum - shifted, zero(features)), axis=-1)
    backprop = jnp.exp(shifted - log_sum) - hot.astype(features.dtype)
    # As TF's GPU kernel and tf2xla do, an out-of-range label makes its row NaN rather than failing.
    bad = ((labels < 0) | (labels >= classes))[:, None]
    nan = jnp.full((), jnp.nan, features.dtype)
    return [jnp.where(bad[:, 0], nan, loss), jnp.where(bad, nan, backprop)]


def channel_axis(data_format: str, ndim: int) -> int:
    return 1 if data_format.startswith("NC") else ndim - 1


def check_data_format(data_format: str, allowed: tuple[str, ...]) -> None:
    if data_format not in allowed:
        raise InvalidArgument(f"data_format {data_format!r} is not one of {', '.join(allowed)}", attr="data_format")


def check_per_channel(x, vector, input: str, data_format: str, x_input: str = "x") -> None:
    """`vector` holds one value per channel of `x` (in data_format), as TF's BiasAdd and FusedBatchNorm need."""
    check_rank(vector, input, rank=1)
    channels = np.shape(x)[channel_axis(data_format, np.ndim(x))]
    if vector.shape[0] != channels:
        raise InvalidArgument(f"input {input!r} has {vector.shape[0]} elements, but {x_input!r} of shape "
                              f"{list(np.shape(x))} has {channels} channels ({data_format}): give one per channel",
                              input=input)


def per_channel(vector, data_format: str, ndim: int):
    """A per-channel vector shaped to broadcast against a tensor in data_format."""
    shape = [1] * ndim
    shape[channel_axis(data_format, ndim)] = vector.shape[0]
    return jnp.reshape(vector, shape)


def check_bias(value, bias, dtype, data_format: str) -> None:
    check_data_format(data_format, ("NHWC", "NCHW"))
    check_dtype(value, "value", dtype)
    check_dtype(bias, "bias", dtype)
    check_rank(value, "value", min_rank=2)
    check_per_channel(value, bias, "bias", data_format, "value")


@register_op("BiasAdd", dtypes=D.NUMERIC)
def bias_add(ctx, value, bias, *, T, data_format):
    check_bias(value, bias, T, data_format)
    return [value + per_channel(bias, data_format, value.ndim)]


@register_op("BiasAddV1", dtypes=D.NUMERIC)
def bias_add_v1(ctx, value, bias, *, T):
    check_bias(value, bias, T, "NHWC")
    return [value + bias]


def lrn(x, depth_radius: int, bias: float, alpha: float, beta: float):
    """Local response normalization over the last axis, computed in float32 for the narrow float types."""
    wide = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    window = (1,) * (x.ndim - 1) + (2 * depth_radius + 1,)
    pads = [(0, 0)] * (x.ndim - 1) + [(depth_radius, depth_radius)]
    # A numpy init value makes this a differentiable reduce_window_sum, which LRNGrad needs.
    square_sum = lax.reduce_window(wide * wide, np.zeros((), wide.dtype), lax.add, window, (1,) * x.ndim, pads)
    return (wide / (bias + alpha * square_sum) ** beta).astype(x.dtype)


def check_depth_radius(depth_radius: int) -> None:
    if depth_radius < 0:
        raise InvalidArgument(f"depth_radius={depth_radius} must be at least 0", attr="depth_radius")


@register_op("LRN", dtypes=LRN_DTYPES)
def local_response_normalization(ctx, input, *, T, depth_radius, bias, alpha, beta):
    check_dtype(input, "input", T)
    check_rank(input, "input", rank=4)
    check_depth_radius(depth_radius)
    return [lrn(input, depth_radius, bias, alpha, beta)]


def batch_norm_axes(data_format: str, ndim: int) -> tuple[int, ...]:
    axis = channel_axis(data_format, ndim)
    return tuple(a for a in range(ndim) if a != axis)


def batch_norm(x, scale, offset, mean, variance, epsilon, exponential_avg_factor, data_format, is_training):
    """FusedBatchNorm's five outputs: y, the running mean and variance, the batch (or given) mean and variance."""
    xf = x.astype(scale.dtype)
    running_mean, running_variance = mean, variance
    if is_training:
        reduce_axes = batch_norm_axes(data_format, x.ndim)
        count = int(np.prod([x.shape[a] for a in reduce_axes]))
        mean, variance = jnp.mean(xf, axis=reduce_axes), jnp.var(xf, axis=reduce_axes)
        # The running statistics get the unbiased variance and TF's exponential averaging; with a factor of 1
        # they are the batch's, as in TF's kernel, whose mean and variance inputs may then be empty.
        factor = jnp.asarray(exponential_avg_factor, scale.dtype)
        unbiased = variance * (count / max(count - 1, 1))
        if exponential_avg_factor == 1:
            running_mean, running_variance = mean, unbiased
        else:
            running_mean = (1 - factor) * running_mean + factor * mean
            running_variance = (1 - factor) * running_variance + factor * unbiased
    y = (xf - per_channel(mean, data_format, x.ndim)) * per_channel(lax.rsqrt(variance + epsilon) * scale,
                                                                     data_format, x.ndim) \
        + per_channel(offset, data_format, x.ndim)
    return [y.astype(x.dtype), running_mean, running_variance, mean, variance]


def check_batch_norm(ctx, x, vectors, T, U, data_format: str, is_training: bool, exponential_avg_factor: float):
    """As TF's FusedBatchNorm kernels: x of rank 4 (5 for V3's 3-D formats); scale, offset, mean and variance of
    one value per channel, except that training with an averaging factor of 1 takes an empty mean and variance."""
    check_data_format(data_format, FUSED_BATCH_NORM_FORMATS[ctx.node.op])
    check_dtype(x, "x", T)
    check_rank(x, "x", rank=len(data_format))
    for name, vector in zip(input_names(ctx.node.op)[1:], vectors):
        check_dtype(vector, name, U, "U" if ctx.node.op != "FusedBatchNorm" else "T")
        statistic = name not in ("scale", "offset")
        if not (statistic and is_training and exponential_avg_factor == 1):
            check_per_channel(x, vector, name, data_format)


@register_op("FusedBatchNorm", dtypes=(np.float32,))
def fused_batch_norm(ctx, x, scale, offset, mean, variance, *, T, epsilon, exponential_avg_factor, data_format,
                     is_training):
    check_batch_norm(ctx, x, (scale, offset, mean, variance), T, T, data_format, is_training, exponential_avg_factor)
    return batch_norm(x, scale, offset, mean, variance, epsilon, exponential_avg_factor, data_format, is_training)


@register_op("FusedBatchNormV2", "FusedBatchNormV3", dtypes=BATCH_NORM_DTYPES)
def fused_batch_norm_v2(ctx, x, scale, offset, mean, variance, *, T, U, epsilon, exponential_avg_factor, data_format,
                        is_training):
    check_batch_norm(ctx, x, (scale, offset, mean, variance), T, U, data_format, is_training, exponential_avg_factor)
    outputs = batch_norm(x, scale, offset, mean, variance, epsilon, exponential_avg_factor, data_format, is_training)
    if ctx.node.op == "FusedBatchNormV3":
        outputs.append(jnp.zeros((0,), scale.dtype))  # reserve_space_3: unused off cuDNN
    return outputs
