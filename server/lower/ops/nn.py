"""Neural-network ops: activations, bias, softmax and cross-entropy, local response and batch normalization."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.registry import register_op

F32 = np.dtype(np.float32)
LRN_DTYPES = (np.float16, ml_dtypes.bfloat16, np.float32)
BATCH_NORM_DTYPES = LRN_DTYPES
# SELU's constants, as TF spells them (Klambauer et al., 2017).
SELU_SCALE = 1.0507009873554804934193349852946
SELU_ALPHA = 1.6732632423543772848170429916717


def zero(x):
    return jnp.zeros((), x.dtype)


@register_op("Relu", dtypes=D.REAL)
def relu(ctx, features, *, T):
    return [jnp.maximum(features, zero(features))]


@register_op("Relu6", dtypes=D.REAL)
def relu6(ctx, features, *, T):
    return [jnp.clip(features, zero(features), jnp.full((), 6, features.dtype))]


# TF's kernels compute exp(x) - 1, not expm1(x), which differs near zero.

@register_op("Elu", dtypes=D.FLOAT)
def elu(ctx, features, *, T):
    return [jnp.where(features < 0, jnp.exp(features) - 1, features)]


@register_op("Selu", dtypes=D.FLOAT)
def selu(ctx, features, *, T):
    scale, scale_alpha = jnp.asarray(SELU_SCALE, T), jnp.asarray(SELU_SCALE * SELU_ALPHA, T)
    return [jnp.where(features < 0, scale_alpha * (jnp.exp(features) - 1), scale * features)]


@register_op("LeakyRelu", dtypes=D.FLOAT)
def leaky_relu(ctx, features, *, T=F32, alpha=0.2):
    # A select, not max(x, alpha * x): alpha may exceed 1.
    return [jnp.where(features > 0, features, features * jnp.asarray(alpha, features.dtype))]


@register_op("Softmax", dtypes=D.FLOAT)
def softmax(ctx, logits, *, T):
    return [jax.nn.softmax(logits, axis=-1)]


@register_op("LogSoftmax", dtypes=D.FLOAT)
def log_softmax(ctx, logits, *, T):
    return [jax.nn.log_softmax(logits, axis=-1)]


def softmax_parts(logits):
    """(logits - max, log-sum-exp of that): log_softmax is their difference, as TF computes it."""
    shifted = logits - jnp.max(logits, axis=-1, keepdims=True)
    log_sum = jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))
    return shifted, log_sum


@register_op("SoftmaxCrossEntropyWithLogits", dtypes=D.FLOAT)
def softmax_cross_entropy(ctx, features, labels, *, T):
    features, labels = jnp.broadcast_arrays(features, labels)
    shifted, log_sum = softmax_parts(features)
    loss = jnp.sum(labels * (log_sum - shifted), axis=-1)
    return [loss, jnp.exp(shifted - log_sum) - labels]


@register_op("SparseSoftmaxCrossEntropyWithLogits", dtypes=D.FLOAT)
def sparse_softmax_cross_entropy(ctx, features, labels, *, T, Tlabels=np.dtype(np.int64)):
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


def per_channel(vector, data_format: str, ndim: int):
    """A per-channel vector shaped to broadcast against a tensor in data_format."""
    shape = [1] * ndim
    shape[channel_axis(data_format, ndim)] = vector.shape[0]
    return jnp.reshape(vector, shape)


@register_op("BiasAdd", dtypes=D.NUMERIC)
def bias_add(ctx, value, bias, *, T, data_format="NHWC"):
    return [value + per_channel(bias, data_format, value.ndim)]


@register_op("BiasAddV1", dtypes=D.NUMERIC)
def bias_add_v1(ctx, value, bias, *, T):
    return [value + bias]


def lrn(x, depth_radius: int, bias: float, alpha: float, beta: float):
    """Local response normalization over the last axis, computed in float32 for the narrow float types."""
    wide = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    window = (1,) * (x.ndim - 1) + (2 * depth_radius + 1,)
    pads = [(0, 0)] * (x.ndim - 1) + [(depth_radius, depth_radius)]
    # A numpy init value makes this a differentiable reduce_window_sum, which LRNGrad needs.
    square_sum = lax.reduce_window(wide * wide, np.zeros((), wide.dtype), lax.add, window, (1,) * x.ndim, pads)
    return (wide / (bias + alpha * square_sum) ** beta).astype(x.dtype)


@register_op("LRN", dtypes=LRN_DTYPES)
def local_response_normalization(ctx, input, *, T=F32, depth_radius=5, bias=1.0, alpha=1.0, beta=0.5):
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
        # The running statistics get the unbiased variance and TF's exponential averaging.
        factor = jnp.asarray(exponential_avg_factor, scale.dtype)
        running_mean = (1 - factor) * running_mean + factor * mean
        running_variance = (1 - factor) * running_variance + factor * variance * (count / max(count - 1, 1))
    y = (xf - per_channel(mean, data_format, x.ndim)) * per_channel(lax.rsqrt(variance + epsilon) * scale,
                                                                     data_format, x.ndim) \
        + per_channel(offset, data_format, x.ndim)
    return [y.astype(x.dtype), running_mean, running_variance, mean, variance]


@register_op("FusedBatchNorm", dtypes=(np.float32,))
def fused_batch_norm(ctx, x, scale, offset, mean, variance, *, T, epsilon=1e-4, exponential_avg_factor=1.0,
                     data_format="NHWC", is_training=True):
    return batch_norm(x, scale, offset, mean, variance, epsilon, exponential_avg_factor, data_format, is_training)


@register_op("FusedBatchNormV2", "FusedBatchNormV3", dtypes=BATCH_NORM_DTYPES)
def fused_batch_norm_v2(ctx, x, scale, offset, mean, variance, *, T, U, epsilon=1e-4, exponential_avg_factor=1.0,
                        data_format="NHWC", is_training=True):
    outputs = batch_norm(x, scale, offset, mean, variance, epsilon, exponential_avg_factor, data_format, is_training)
    if ctx.node.op == "FusedBatchNormV3":
        outputs.append(jnp.zeros((0,), scale.dtype))  # reserve_space_3: unused off cuDNN
    return outputs
