"""Max and average pooling (2-D and 3-D) and their gradients.

Max-pool gradients route each window's gradient to its first maximum in row-major window order, as TF's
2-D CPU kernels, its graphs' MaxPool3DGrad (oneDNN's kernel) and XLA do; working from the argmax rather than autodiff
also serves integer types. (TF's eager MaxPool3DGrad, Eigen's kernel, gives it to every tied element instead.)
"""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import InvalidArgument, Unimplemented, check_dtype
from xlacs_server.lower.ops.array import sizes
from xlacs_server.lower.ops.conv import check_padding
from xlacs_server.lower.ops.nn import check_data_format
from xlacs_server.lower.registry import register_op

MAX_POOL_DTYPES = D.FLOAT + D.SIGNED + (np.uint8, np.uint16)
MAX_POOL_GRAD_DTYPES = D.REAL
POOL_3D_DTYPES = (np.float16, ml_dtypes.bfloat16, np.float32)


def window(values, ndim: int, name: str, *, from_input: bool) -> tuple[int, ...]:
    """A ksize or strides attr (an input of the V2 ops): a positive size over every dimension in data_format
    order. XLA would pool over the batch too; TF's kernels do not."""
    values = tuple(int(v) for v in np.ravel(values))
    blame = {"input" if from_input else "attr": name}
    if len(values) != ndim or min(values) < 1:
        raise InvalidArgument(f"{name} {list(values)} must hold {ndim} sizes, one per dimension, each at least 1",
                              **blame)
    if values[0] != 1:
        raise Unimplemented(f"{name} {list(values)}: pooling over the batch dimension is not supported", **blame)
    return values


def pool_pads(shape, ksize, strides, padding: str, explicit_paddings=()):
    if padding == "EXPLICIT":
        return [tuple(explicit_paddings[i:i + 2]) for i in range(0, len(explicit_paddings), 2)]
    return lax.padtype_to_pads(shape, ksize, strides, padding)


def lowest(dtype):
    return -np.inf if jnp.issubdtype(dtype, jnp.floating) else jnp.iinfo(dtype).min


# Window reductions take numpy init values: JAX recognizes a concrete (add, 0) or (max, lowest) as a
# differentiable, transposable reduce_window_sum/max, which the gradients need.
# `reduce_window` is lax.reduce_window or a platform's equivalent (lower/ops/cpu.py).
def max_pool(x, ksize, strides, pads, reduce_window=lax.reduce_window):
    return reduce_window(x, np.array(lowest(x.dtype), x.dtype), lax.max, ksize, strides, pads)


def avg_pool(x, ksize, strides, pads, reduce_window=lax.reduce_window):
    total = reduce_window(x, np.zeros((), x.dtype), lax.add, ksize, strides, pads)
    return total / window_counts(x.shape, ksize, strides, pads).astype(x.dtype)


def window_counts(shape, ksize, strides, pads) -> np.ndarray:
    """How many elements of the input, not of its padding, each window covers (TF averages over those), shaped
    to broadcast against the pooled output. Computed here: as a reduce_window over a constant, XLA would fold
    it at compile time, which takes seconds on large inputs. The counts are a product of per-dimension counts,
    so only the dimensions where windows reach into padding take space."""
    count = np.ones([1] * len(shape), np.int64)
    for axis, (n, k, s, (before, after)) in enumerate(zip(shape, ksize, strides, pads)):
        starts = np.arange(0, n + before + after - k + 1, s) - before
        along = np.minimum(starts + k, n) - np.maximum(starts, 0)
        count = count * (along.reshape([-1 if a == axis else 1 for a in range(len(shape))])
                         if along.min() != along.max() else along[:1].reshape([1] * len(shape)))
    return count


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


def geometry(shape, ksize, strides, padding: str, explicit_paddings=(), *, data_format: str, rank: int,
             input: str = "input", window_inputs: bool = False):
    """(ksize, strides, pads) over every dimension of an input of `shape`, checked as TF's pooling kernels do."""
    if data_format == "NCHW_VECT_C":
        raise Unimplemented("data_format 'NCHW_VECT_C' is not supported: use NHWC or NCHW", attr="data_format")
    check_data_format(data_format, ("NHWC", "NCHW") if rank == 4 else ("NDHWC", "NCDHW"))
    if len(shape) != rank:
        raise InvalidArgument(f"input {input!r} has shape {list(shape)}: it must have rank {rank}", input=input)
    check_padding(padding, explicit_paddings, rank, data_format)
    ksize = window(ksize, rank, "ksize", from_input=window_inputs)
    strides = window(strides, rank, "strides", from_input=window_inputs)
    return ksize, strides, pool_pads(shape, ksize, strides, padding, explicit_paddings)


def check_grad(grad, shape, window_geometry, input: str = "grad") -> None:
    """A pooling gradient's `grad` has the shape of the pooling's output."""
    expected = jax.eval_shape(lambda x: max_pool(x, *window_geometry), jax.ShapeDtypeStruct(shape, np.float32)).shape
    if np.shape(grad) != expected:
        raise InvalidArgument(f"input {input!r} has shape {list(np.shape(grad))}, but the pooling it is the gradient "
                              f"of outputs {list(expected)}", input=input)


def operands(dtype, **tensors) -> None:
    for name, x in tensors.items():
        check_dtype(x, name, dtype)


@register_op("MaxPool", dtypes=MAX_POOL_DTYPES)
def max_pool_op(ctx, input, *, T, ksize, strides, padding, explicit_paddings, data_format):
    operands(T, input=input)
    return [max_pool(input, *geometry(input.shape, ksize, strides, padding, explicit_paddings, data_format=data_format,
                                      rank=4))]


@register_op("MaxPoolV2", dtypes=MAX_POOL_DTYPES, constant_inputs=("ksize", "strides"))
def max_pool_v2(ctx, input, ksize, strides, *, T, padding, data_format):
    operands(T, input=input)
    return [max_pool(input, *geometry(input.shape, ksize, strides, padding, data_format=data_format, rank=4,
                                      window_inputs=True))]


@register_op("MaxPool3D", dtypes=POOL_3D_DTYPES)
def max_pool_3d(ctx, input, *, ksize, strides, padding, data_format, T):
    operands(T, input=input)
    return [max_pool(input, *geometry(input.shape, ksize, strides, padding, data_format=data_format, rank=5))]


@register_op("AvgPool", dtypes=D.FLOAT)
def avg_pool_op(ctx, value, *, T, ksize, strides, padding, data_format):
    operands(T, value=value)
    return [avg_pool(value, *geometry(value.shape, ksize, strides, padding, data_format=data_format, rank=4,
                                      input="value"))]


@register_op("AvgPool3D", dtypes=D.FLOAT)
def avg_pool_3d(ctx, input, *, T, ksize, strides, padding, data_format):
    operands(T, input=input)
    return [avg_pool(input, *geometry(input.shape, ksize, strides, padding, data_format=data_format, rank=5))]


def max_pool_grad_geometry(orig_input, orig_output, grad, dtype, *, input_dtype=None, grad_grad=False, **pooling):
    """The pooling a max-pool gradient node differentiates, its operands checked: of their dtypes, orig_input of
    the pooling's rank, orig_output and grad of its output's shape (grad of orig_input's for MaxPoolGradGrad)."""
    operands(input_dtype or dtype, orig_input=orig_input, orig_output=orig_output)  # MaxPool3DGrad's are TInput
    operands(dtype, grad=grad)
    window_geometry = geometry(orig_input.shape, input="orig_input", **pooling)
    check_grad(orig_output, orig_input.shape, window_geometry, "orig_output")
    if not grad_grad:
        check_grad(grad, orig_input.shape, window_geometry)
    elif grad.shape != orig_input.shape:
        raise InvalidArgument(f"input 'grad' has shape {list(grad.shape)}, but 'orig_input' has "
                              f"{list(orig_input.shape)}: they must be the same", input="grad")
    return window_geometry


@register_op("MaxPoolGrad", dtypes=MAX_POOL_GRAD_DTYPES)
def max_pool_grad_op(ctx, orig_input, orig_output, grad, *, ksize, strides, padding, explicit_paddings, data_format, T):
    pooling = max_pool_grad_geometry(orig_input, orig_output, grad, T, ksize=ksize, strides=strides, padding=padding,
                                     explicit_paddings=explicit_paddings, data_format=data_format, rank=4)
    return [max_pool_grad(orig_input, grad, *pooling)]


@register_op("MaxPoolGradV2", dtypes=MAX_POOL_GRAD_DTYPES, constant_inputs=("ksize", "strides"))
def max_pool_grad_v2(ctx, orig_input, orig_output, grad, ksize, strides, *, padding, data_format, T):
    pooling = max_pool_grad_geometry(orig_input, orig_output, grad, T, ksize=ksize, strides=strides, padding=padding,
                                     data_format=data_format, rank=4, window_inputs=True)
    return [max_pool_grad(orig_input, grad, *pooling)]


@register_op("MaxPool3DGrad", dtypes=POOL_3D_DTYPES)
def max_pool_3d_grad(ctx, orig_input, orig_output, grad, *, ksize, strides, padding, data_format, T, TInput):
    pooling = max_pool_grad_geometry(orig_input, orig_output, grad, T, input_dtype=TInput, ksize=ksize,
                                     strides=strides, padding=padding, data_format=data_format, rank=5)
    return [max_pool_grad(orig_input, grad, *pooling)]


@register_op("MaxPoolGradGrad", dtypes=MAX_POOL_GRAD_DTYPES)
def max_pool_grad_grad_op(ctx, orig_input, orig_output, grad, *, ksize, strides, padding, data_format, T):
    pooling = max_pool_grad_geometry(orig_input, orig_output, grad, T, grad_grad=True, ksize=ksize, strides=strides,
                                     padding=padding, data_format=data_format, rank=4)
    return [max_pool_grad_grad(orig_input, grad, *pooling)]


@register_op("MaxPool3DGradGrad", dtypes=MAX_POOL_GRAD_DTYPES)
def max_pool_3d_grad_grad(ctx, orig_input, orig_output, grad, *, ksize, strides, padding, data_format, T):
    pooling = max_pool_grad_geometry(orig_input, orig_output, grad, T, grad_grad=True, ksize=ksize, strides=strides,
                                     padding=padding, data_format=data_format, rank=5)
    return [max_pool_grad_grad(orig_input, grad, *pooling)]


@register_op("MaxPoolGradGradV2", dtypes=MAX_POOL_GRAD_DTYPES, constant_inputs=("ksize", "strides"))
def max_pool_grad_grad_v2(ctx, orig_input, orig_output, grad, ksize, strides, *, padding, data_format, T):
    pooling = max_pool_grad_geometry(orig_input, orig_output, grad, T, grad_grad=True, ksize=ksize, strides=strides,
                                     padding=padding, data_format=data_format, rank=4, window_inputs=True)
    return [max_pool_grad_grad(orig_input, grad, *pooling)]


def avg_pool_grad_checked(orig_input_shape, grad, dtype, rank: int, **pooling):
    shape = sizes(orig_input_shape, "orig_input_shape")
    operands(dtype, grad=grad)
    window_geometry = geometry(shape, input="orig_input_shape", rank=rank, **pooling)
    check_grad(grad, shape, window_geometry)
    return avg_pool_grad(shape, grad, *window_geometry)


@register_op("AvgPoolGrad", dtypes=D.FLOAT, constant_inputs=("orig_input_shape",))
def avg_pool_grad_op(ctx, orig_input_shape, grad, *, ksize, strides, padding, data_format, T):
    return [avg_pool_grad_checked(orig_input_shape, grad, T, 4, ksize=ksize, strides=strides, padding=padding,
                                  data_format=data_format)]


@register_op("AvgPool3DGrad", dtypes=D.FLOAT, constant_inputs=("orig_input_shape",))
def avg_pool_3d_grad(ctx, orig_input_shape, grad, *, ksize, strides, padding, data_format, T):
    return [avg_pool_grad_checked(orig_input_shape, grad, T, 5, ksize=ksize, strides=strides, padding=padding,
                                  data_format=data_format)]


@register_op("MaxPoolWithArgmax", dtypes=MAX_POOL_GRAD_DTYPES)
def max_pool_with_argmax(ctx, input, *, ksize, strides, padding, T, Targmax, include_batch_in_index):
    operands(T, input=input)
    ksize, strides, pads = geometry(input.shape, ksize, strides, padding, data_format="NHWC", rank=4)
    argmax = window_argmax(input, ksize, strides, pads).astype(Targmax)
    if not include_batch_in_index:  # TF's index is then relative to the image
        argmax = argmax % int(np.prod(input.shape[1:]))
    return [max_pool(input, ksize, strides, pads), argmax]


@register_op("MaxPoolGradWithArgmax", dtypes=MAX_POOL_GRAD_DTYPES)
def max_pool_grad_with_argmax(ctx, input, grad, argmax, *, ksize, strides, padding, include_batch_in_index, Targmax, T):
    """Routes each gradient to the flat position MaxPoolWithArgmax recorded."""
    operands(T, input=input, grad=grad)
    check_dtype(argmax, "argmax", Targmax, "Targmax")
    pooling = geometry(input.shape, ksize, strides, padding, data_format="NHWC", rank=4)
    check_grad(grad, input.shape, pooling)
    check_grad(argmax, input.shape, pooling, "argmax")
    flat = jnp.reshape(argmax, (argmax.shape[0], -1)).astype(np.int64)
    if not include_batch_in_index:  # the recorded index is relative to its image
        flat = flat + np.arange(argmax.shape[0])[:, None] * int(np.prod(input.shape[1:]))
    total = jnp.zeros(input.size, grad.dtype).at[jnp.reshape(flat, -1)].add(jnp.reshape(grad, -1))
    return [jnp.reshape(total, input.shape)]
