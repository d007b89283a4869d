"""Gradient ops of activations, bias, batch and local response normalization, as TF's kernels define them."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import check_dtype, check_rank, check_same_shapes, input_names
from xlacs_server.lower.ops.nn import (BATCH_NORM_DTYPES, FUSED_BATCH_NORM_FORMATS, LRN_DTYPES, SELU_ALPHA,
                                       SELU_SCALE, batch_norm_axes, channel_axis, check_data_format, check_depth_radius,
                                       check_per_channel, lrn, per_channel, zero)
from xlacs_server.lower.registry import register_op


def activation_grad(fn, ctx, gradients, x, *, T):
    check_same_shapes(ctx.node.op, (gradients, x), T)
    return [fn(gradients, x)]


# TF op -> (backprop from the gradients and the op's features or outputs, allowed dtypes)
ACTIVATION_GRADS = {
    "ReluGrad": (lambda g, features: jnp.where(features > 0, g, zero(g)), D.REAL),
    "Relu6Grad": (lambda g, features: jnp.where((features > 0) & (features < 6), g, zero(g)), D.REAL),
    "EluGrad": (lambda g, outputs: jnp.where(outputs < 0, g * (outputs + 1), g), D.FLOAT),
    "SeluGrad": (lambda g, outputs: jnp.where(outputs < 0,
                                              g * (outputs + jnp.asarray(SELU_SCALE * SELU_ALPHA, g.dtype)),
                                              g * jnp.asarray(SELU_SCALE, g.dtype)), D.FLOAT),
}
for _op, (_fn, _dtypes) in ACTIVATION_GRADS.items():
    register_op(_op, dtypes=_dtypes)(functools.partial(activation_grad, _fn))


@register_op("LeakyReluGrad", dtypes=D.FLOAT)
def leaky_relu_grad(ctx, gradients, features, *, T, alpha):
    check_same_shapes(ctx.node.op, (gradients, features), T)
    return [jnp.where(features > 0, gradients, gradients * jnp.asarray(alpha, gradients.dtype))]


@register_op("BiasAddGrad", dtypes=D.NUMERIC)
def bias_add_grad(ctx, out_backprop, *, T, data_format):
    check_data_format(data_format, ("NHWC", "NCHW"))
    check_dtype(out_backprop, "out_backprop", T)
    check_rank(out_backprop, "out_backprop", min_rank=2)
    axis = channel_axis(data_format, out_backprop.ndim)
    reduce_axes = tuple(a for a in range(out_backprop.ndim) if a != axis)
    return [jnp.sum(out_backprop, axis=reduce_axes, dtype=out_backprop.dtype)]


@register_op("LRNGrad", dtypes=LRN_DTYPES)
def lrn_grad(ctx, input_grads, input_image, output_image, *, T, depth_radius, bias, alpha, beta):
    check_same_shapes(ctx.node.op, (input_grads, input_image, output_image), T)
    check_rank(input_grads, "input_grads", rank=4)
    check_depth_radius(depth_radius)
    _, backward = jax.vjp(lambda x: lrn(x, depth_radius, bias, alpha, beta), input_image)
    return list(backward(input_grads))


def batch_norm_grad(y_backprop, x, scale, reserve_space_1, reserve_space_2, epsilon, data_format, is_training):
    """reserve_space_1/2 are the batch mean and (biased) variance when training, the population ones otherwise."""
    reduce_axes = batch_norm_axes(data_format, x.ndim)
    dy, xf = y_backprop.astype(scale.dtype), x.astype(scale.dtype)
    inv_std = lax.rsqrt(reserve_space_2 + jnp.asarray(epsilon, scale.dtype))
    centered = xf - per_channel(reserve_space_1, data_format, x.ndim)
    offset_backprop = jnp.sum(dy, axis=reduce_axes)
    scale_backprop = jnp.sum(dy * centered, axis=reduce_axes) * inv_std
    if is_training:
        mean_dy = jnp.mean(dy, axis=reduce_axes)
        mean_dy_centered = jnp.mean(dy * centered, axis=reduce_axes)
        x_backprop = per_channel(scale * inv_std, data_format, x.ndim) * (
            dy - per_channel(mean_dy, data_format, x.ndim)
            - centered * per_channel(mean_dy_centered * inv_std * inv_std, data_format, x.ndim))
    else:
        x_backprop = dy * per_channel(scale * inv_std, data_format, x.ndim)
    unused = jnp.zeros((), scale.dtype)  # TF's placeholders for cuDNN's reserve spaces
    return [x_backprop.astype(x.dtype), scale_backprop, offset_backprop, unused, unused]


def check_batch_norm_grad(ctx, y_backprop, x, vectors, T, U, data_format: str) -> None:
    """As TF's FusedBatchNormGrad kernels: y_backprop and x of one shape, of the rank data_format says; scale and
    the reserve spaces (the statistics) of one value per channel."""
    check_data_format(data_format, FUSED_BATCH_NORM_FORMATS[ctx.node.op.replace("Grad", "")])
    check_same_shapes(ctx.node.op, (y_backprop, x), T)
    check_rank(x, "x", rank=len(data_format))
    for name, vector in zip(input_names(ctx.node.op)[2:], vectors):
        check_dtype(vector, name, U, "U" if ctx.node.op != "FusedBatchNormGrad" else "T")
        check_per_channel(x, vector, name, data_format)


@register_op("FusedBatchNormGrad", dtypes=(np.float32,))
def fused_batch_norm_grad(ctx, y_backprop, x, scale, reserve_space_1, reserve_space_2, *, T, epsilon, data_format,
                          is_training):
    check_batch_norm_grad(ctx, y_backprop, x, (scale, reserve_space_1, reserve_space_2), T, T, data_format)
    return batch_norm_grad(y_backprop, x, scale, reserve_space_1, reserve_space_2, epsilon, data_format, is_training)


@register_op("FusedBatchNormGradV2", "FusedBatchNormGradV3", dtypes=BATCH_NORM_DTYPES)
def fused_batch_norm_grad_v2(ctx, y_backprop, x, scale, reserve_space_1, reserve_space_2, *reserve_space_3, T, U,
                             epsilon, data_format, is_training):
    """V3's extra reserve_space_3 input is cuDNN's; the gradient does not need it."""
    check_batch_norm_grad(ctx, y_backprop, x, (scale, reserve_space_1, reserve_space_2), T, U, data_format)
    return batch_norm_grad(y_backprop, x, scale, reserve_space_1, reserve_space_2, epsilon, data_format, is_training)
