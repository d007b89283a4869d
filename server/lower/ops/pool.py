"""Max and average pooling (2-D and 3-D) and their gradients.

Max-pool gradients route each window's gradient to its first maximum in row-major window order, as TF's
2-D CPU kernels and XLA do; working from the argmax rather than autodiff also serves integer types.
"""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.ops.array import axes
from xlacs_server.lower.registry import register_op

MAX_POOL_DTYPES = D.FLOAT + D.SIGNED + (np.uint8, np.uint16)
MAX_POOL_GRAD_DTYPES = D.REAL
POOL_3D_DTYPES = (np.float16, ml_dtypes.bfloat16, np.float32)


def window(values, ndim: int) -> tuple[int, ...]:
    """A ksize or strides attr, given over every dimension in data_format order (or over the spatial ones)."""
    values = tuple(int(v) for v in values)
    return values if len(values) == ndim else (1, *values, 1)


def pool_pads(shape, ksize, strides, padding: str, explicit_paddings=()):
    if padding == "EXPLICIT":
        return [tuple(explicit_paddings[i:i + 2]) for i in range(0, len(explicit_paddings), 2)]
    return lax.padtype_to_pads(shape, ksize, strides, padding)


def lowest(dtype):
    return -np.inf if jnp.issubdtype(dtype, jnp.floating) else jnp.iinfo(dtype).min


# Window reductions take numpy init values: JAX recognizes a concrete (add, 0) or (max, lowest) as a
# differentiable, transposable reduce_window_sum/max, which the gradients need.
def max_pool(x, ksize, strides, pads):
    return lax.reduce_window(x, np.array(lowest(x.dtype), x.dtype), lax.max, ksize, strides, pads)


def avg_pool(x, ksize, strides, pads):
    zero = np.zeros((), x.dtype)
    total = lax.reduce_window(x, zero, lax.add, ksize, strides, pads)
    # TF averages over the window's elements inside the input, not the padding.
    count = lax.reduce_window(np.ones(x.shape, x.dtype), zero, lax.add, ksize, strides, pads)
    return total / count


def window_argmax(x, ksize, strides, pads):
    """The flat index into x of each window's first maximum."""
    index_dtype = np.int32 if x.size < 2 ** 31 else np.int64
    index = jnp.reshape(jnp.arange(x.size, dtype=index_dtype), x.shape)

    def first_max(a, b):
        (a_value, a_index), (b_value, b_index) = a, b
        take_b = (b_value > a_value) | ((b_value == a_value) & (b_index < a_index))
        return jnp.where(take_b, b_value, a_value), jnp.where(take_b, b_index, a_index)

    init = (jnp.asarray(lowest(x.dtype), x.dtype), jnp.asarray(np.iinfo(index_dtype).max, index_dtype))
    return lax.reduce_window((x, index), init, first_max, ksize, strides, pads)[1]


def max_pool_grad(orig_input, grad, ksize, strides, pads):
    argmax = window_argmax(orig_input, ksize, strides, pads)
    flat = jnp.zeros(orig_input.size, grad.dtype).at[jnp.reshape(argmax, -1)].add(jnp.reshape(grad, -1))
    return jnp.reshape(flat, orig_input.shape)


def max_pool_grad_grad(orig_input, grad, ksize, strides, pads):
    return jnp.take(jnp.reshape(grad, -1), window_argmax(orig_input, ksize, strides, pads))


def avg_pool_grad(input_shape, grad, ksize, strides, pads):
    forward = jax.linear_transpose(lambda x: avg_pool(x, ksize, strides, pads),
                                   jax.ShapeDtypeStruct(tuple(input_shape), grad.dtype))
    return forward(grad)[0]


def geometry(shape, ksize, strides, padding: str, explicit_paddings=()):
    """(ksize, strides, pads) over every dimension of an input of `shape`."""
    ksize, strides = window(ksize, len(shape)), window(strides, len(shape))
    return ksize, strides, pool_pads(shape, ksize, strides, padding, explicit_paddings)


@register_op("MaxPool", dtypes=MAX_POOL_DTYPES)
def max_pool_op(ctx, input, *, T=np.dtype(np.float32), ksize, strides, padding, explicit_paddings=(),
                data_format="NHWC"):
    return [max_pool(input, *geometry(input.shape, ksize, strides, padding, explicit_paddings))]


@register_op("MaxPoolV2", dtypes=MAX_POOL_DTYPES, constant_inputs=("ksize", "strides"))
def max_pool_v2(ctx, input, ksize, strides, *, T=np.dtype(np.float32), padding, data_format="NHWC"):
    return [max_pool(input, *geometry(input.shape, axes(ksize), axes(strides), padding))]


@register_op("MaxPool3D", dtypes=POOL_3D_DTYPES)
def max_pool_3d(ctx, input, *, ksize, strides, padding, data_format="NDHWC", T):
    return [max_pool(input, *geometry(input.shape, ksize, strides, padding))]


@register_op("AvgPool", dtypes=D.FLOAT)
def avg_pool_op(ctx, value, *, T, ksize, strides, padding, data_format="NHWC"):
    return [avg_pool(value, *geometry(value.shape, ksize, strides, padding))]


@register_op("AvgPool3D", dtypes=D.FLOAT)
def avg_pool_3d(ctx, input, *, T, ksize, strides, padding, data_format="NDHWC"):
    return [avg_pool(input, *geometry(input.shape, ksize, strides, padding))]


@register_op("MaxPoolGrad", dtypes=MAX_POOL_GRAD_DTYPES)
def max_pool_grad_op(ctx, orig_input, orig_output, grad, *, ksize, strides, padding, explicit_paddings=(),
                     data_format="NHWC", T=np.dtype(np.float32)):
    return [max_pool_grad(orig_input, grad, *geometry(orig_input.shape, ksize, strides, padding, explicit_paddings))]


@register_op("MaxPoolGradV2", dtypes=MAX_POOL_GRAD_DTYPES, constant_inputs=("ksize", "strides"))
def max_pool_grad_v2(ctx, orig_input, orig_output, grad, ksize, strides, *, padding, data_format="NHWC",
                     T=np.dtype(np.float32)):
    return [max_pool_grad(orig_input, grad, *geometry(orig_input.shape, axes(ksize), axes(strides), padding))]


@register_op("MaxPool3DGrad", dtypes=POOL_3D_DTYPES)
def max_pool_3d_grad(ctx, orig_input, orig_output, grad, *, ksize, strides, padding, data_format="NDHWC",
                     T=np.dtype(np.float32), TInput=np.dtype(np.float32)):
    return [max_pool_grad(orig_input, grad, *geometry(orig_input.shape, ksize, strides, padding))]


@register_op("MaxPoolGradGrad", dtypes=MAX_POOL_GRAD_DTYPES)
def max_pool_grad_grad_op(ctx, orig_input, orig_output, grad, *, ksize, strides, padding, data_format="NHWC", T):
    return [max_pool_grad_grad(orig_input, grad, *geometry(orig_input.shape, ksize, strides, padding))]


@register_op("MaxPool3DGradGrad", dtypes=MAX_POOL_GRAD_DTYPES)
def max_pool_3d_grad_grad(ctx, orig_input, orig_output, grad, *, ksize, strides, padding, data_format="NDHWC", T):
    return [max_pool_grad_grad(orig_input, grad, *geometry(orig_input.shape, ksize, strides, padding))]


@register_op("MaxPoolGradGradV2", dtypes=MAX_POOL_GRAD_DTYPES, constant_inputs=("ksize", "strides"))
def max_pool_grad_grad_v2(ctx, orig_input, orig_output, grad, ksize, strides, *, padding, data_format="NHWC", T):
    return [max_pool_grad_grad(orig_input, grad, *geometry(orig_input.shape, axes(ksize), axes(strides), padding))]


@register_op("AvgPoolGrad", dtypes=D.FLOAT, constant_inputs=("orig_input_shape",))
def avg_pool_grad_op(ctx, orig_input_shape, grad, *, ksize, strides, padding, data_format="NHWC", T):
    shape = axes(orig_input_shape)
    return [avg_pool_grad(shape, grad, *geometry(shape, ksize, strides, padding))]


@register_op("AvgPool3DGrad", dtypes=D.FLOAT, constant_inputs=("orig_input_shape",))
def avg_pool_3d_grad(ctx, orig_input_shape, grad, *, ksize, strides, padding, data_format="NDHWC", T):
    shape = axes(orig_input_shape)
    return [avg_pool_grad(shape, grad, *geometry(shape, ksize, strides, padding))]


@register_op("MaxPoolWithArgmax", dtypes=MAX_POOL_GRAD_DTYPES)
def max_pool_with_argmax(ctx, input, *, ksize, strides, padding, T, Targmax=np.dtype(np.int64),
                         include_batch_in_index=False):
    ksize, strides, pads = geometry(input.shape, ksize, strides, padding)
    argmax = window_argmax(input, ksize, strides, pads).astype(Targmax)
    if not include_batch_in_index:  # TF's index is then relative to the image
        argmax = argmax % int(np.prod(input.shape[1:]))
    return [max_pool(input, ksize, strides, pads), argmax]


@register_op("MaxPoolGradWithArgmax", dtypes=MAX_POOL_GRAD_DTYPES)
def max_pool_grad_with_argmax(ctx, input, grad, argmax, *, ksize, strides, padding, include_batch_in_index=False,
                              Targmax, T):
    """Routes each gradient to the flat position MaxPoolWithArgmax recorded."""
    flat = jnp.reshape(argmax, (argmax.shape[0], -1)).astype(np.int64)
    if not include_batch_in_index:  # the recorded index is relative to its image
        flat = flat + np.arange(argmax.shape[0])[:, None] * int(np.prod(input.shape[1:]))
    total = jnp.zeros(input.size, grad.dtype).at[jnp.reshape(flat, -1)].add(jnp.reshape(grad, -1))
    return [jnp.reshape(total, input.shape)]
