"""Graph plumbing and tensor creation: placeholders, constants, shapes, reshapes, casts, fills, ranges, checks."""
import math

import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.errors import InvalidRequest
from xlacs_server.lower import dtypes as D, limits
from xlacs_server.lower.checks import InvalidArgument, Unimplemented, check_dtype
from xlacs_server.lower.context import is_constant
from xlacs_server.lower.engine import FOLD_MAX_ELEMENTS
from xlacs_server.lower.registry import register_op


def axes(value) -> tuple[int, ...]:
    """A constant axis or list of axes as a tuple of ints."""
    return tuple(int(a) for a in np.atleast_1d(value))


def scalar(value, name: str):
    """A constant scalar input; TF also accepts a length-1 vector for some of them."""
    value = np.asarray(value)
    if value.size != 1 or value.ndim > 1:
        raise InvalidArgument(f"input {name!r} must be a scalar, but has shape {list(value.shape)}", input=name)
    return value.reshape(())


def host_or_traced(x):
    """numpy for a constant the engine folds on the host, jax.numpy otherwise: a shape op folded with numpy
    compiles nothing, where jax.numpy compiles each op for each new shape (docs/performance.md, Cold compile)."""
    return np if is_constant(x) and x.size <= FOLD_MAX_ELEMENTS else jnp


def sizes(value, name: str, *, inferred: bool = False) -> tuple[int, ...]:
    """A constant shape operand (Fill's dims, Reshape's shape): a vector of sizes, none negative, except that
    with `inferred` one may be -1. A scalar counts as a vector of one, as in TF's kernels."""
    if np.ndim(value) > 1:
        raise InvalidArgument(f"input {name!r} must be a vector, but has shape {list(np.shape(value))}", input=name)
    shape = axes(value)
    if min(shape, default=0) < (-1 if inferred else 0) or (inferred and shape.count(-1) > 1):
        raise InvalidArgument(f"input {name!r} holds {list(shape)}: sizes must be at least 0"
                              + (", but for one -1 (inferred)" if inferred else ""), input=name)
    return shape


@register_op("Placeholder", type_attr="dtype", foldable=False)
def placeholder(ctx, *, dtype, shape):
    raise InvalidRequest(f"placeholder {ctx.name!r} is not fed: add it to the feeds with its dtype and shape")


@register_op("PlaceholderWithDefault", type_attr="dtype")
def placeholder_with_default(ctx, default, *, dtype, shape):
    return [default]


@register_op("Const", type_attr="dtype", dtypes=D.ALL)
def const(ctx, *, value, dtype):
    return [value]


@register_op("Identity", "Snapshot", "StopGradient", "GuaranteeConst", "DeepCopy")
def identity(ctx, input, *, T):
    return [input]


@register_op("PreventGradient")
def prevent_gradient(ctx, input, *, T, message):
    return [input]


# A compiled program cannot raise mid-run; as in tf2xla, numeric checks pass their input through.
@register_op("CheckNumerics", "CheckNumericsV2", dtypes=D.FLOAT)
def check_numerics(ctx, tensor, *, T, message):
    return [tensor]


@register_op("Assert")
def assert_(ctx, condition, *data, T, summarize):
    return []


@register_op("EnsureShape")
def ensure_shape(ctx, input, *, shape, T):
    if shape is not None and (len(shape) != input.ndim or
                              any(want not in (-1, got) for want, got in zip(shape, input.shape))):
        raise InvalidArgument(f"input 'input' has shape {list(input.shape)}, but EnsureShape expects "
                              f"{[None if d < 0 else d for d in shape]} (its attr shape)", input="input")
    return [input]


@register_op("IdentityN")
def identity_n(ctx, *xs, T):
    return list(xs)


@register_op("_ListToArray")
def list_to_array(ctx, *inputs, Tin, T, N):
    return list(inputs)


@register_op("_ArrayToList")
def array_to_list(ctx, *inputs, T, N, out_types):
    return list(inputs)


@register_op("FakeParam", type_attr="dtype")
def fake_param(ctx, *, dtype, shape):
    """A stand-in that XLA-compiled TF graphs keep for values that are never read; zeros, as in tf2xla."""
    if shape is None or any(d < 0 for d in shape):
        raise InvalidArgument(f"shape={shape} must be fully defined", attr="shape")
    return [jnp.zeros(shape, dtype)]


@register_op("NoOp")
def no_op(ctx):
    return []


@register_op("Shape", type_attr="out_type")
def shape(ctx, x, *, T, out_type):
    return [np.array(x.shape, dtype=out_type)]


@register_op("ShapeN", type_attr="out_type")
def shape_n(ctx, *xs, N, T, out_type):
    return [np.array(x.shape, dtype=out_type) for x in xs]


@register_op("Rank")
def rank(ctx, input, *, T):
    return [np.array(np.ndim(input), dtype=np.int32)]


@register_op("Size", type_attr="out_type")
def size(ctx, input, *, T, out_type):
    return [np.array(np.size(input), dtype=out_type)]


@register_op("Reshape", constant_inputs=("shape",))
def reshape(ctx, tensor, shape, *, T, Tshape):
    check_dtype(shape, "shape", Tshape, "Tshape")
    dims, size = sizes(shape, "shape", inferred=True), int(np.size(tensor))
    known = math.prod(d for d in dims if d != -1)
    if -1 in dims and known and size % known == 0:
        dims = tuple(size // known if d == -1 else d for d in dims)
    if math.prod(dims) != size or -1 in dims:
        raise InvalidArgument(f"input 'tensor' has {size} values, which shape {list(axes(shape))} cannot hold",
                              input="shape")
    return [jnp.reshape(tensor, dims)]


@register_op("Transpose", constant_inputs=("perm",))
def transpose(ctx, x, perm, *, T, Tperm):
    return [host_or_traced(x).transpose(x, permutation(x, perm, Tperm))]


def permutation(x, perm, Tperm) -> tuple[int, ...]:
    """Transpose's perm: a permutation of x's dimensions."""
    check_dtype(perm, "perm", Tperm, "Tperm")
    order = axes(perm) if np.ndim(perm) == 1 else None
    if order is None or sorted(a % max(np.ndim(x), 1) for a in order) != list(range(np.ndim(x))) or \
            min(order, default=0) < -np.ndim(x) or max(order, default=0) >= np.ndim(x):
        raise InvalidArgument(f"input 'perm' holds {np.asarray(perm).tolist()}, which is not a permutation of the "
                              f"{np.ndim(x)} dimensions of 'x', shape {list(np.shape(x))}", input="perm")
    return order


@register_op("ConjugateTranspose", constant_inputs=("perm",))
def conjugate_transpose(ctx, x, perm, *, T, Tperm):
    order = permutation(x, perm, Tperm)
    return [jnp.conj(jnp.transpose(x, order)) if jnp.iscomplexobj(x) else jnp.transpose(x, order)]


@register_op("Squeeze")
def squeeze(ctx, x, *, T, squeeze_dims):
    rank = np.ndim(x)
    for dim in squeeze_dims:
        if not -rank <= dim < rank or x.shape[dim] != 1:
            raise InvalidArgument(f"squeeze_dims={list(squeeze_dims)}: dimension {dim} of 'x', shape "
                                  f"{list(np.shape(x))}, is not one of size 1", attr="squeeze_dims")
    return [host_or_traced(x).squeeze(x, axis=tuple(squeeze_dims) or None)]


@register_op("ExpandDims", constant_inputs=("dim",))
def expand_dims(ctx, x, dim, *, T, Tdim):
    check_dtype(dim, "dim", Tdim, "Tdim")
    if np.size(dim) != 1 or not -np.ndim(x) - 1 <= int(dim.reshape(-1)[0]) <= np.ndim(x):
        raise InvalidArgument(f"input 'dim' holds {dim.tolist()}: it must be one value in [{-np.ndim(x) - 1}, "
                              f"{np.ndim(x)}] for 'x' of shape {list(np.shape(x))}", input="dim")
    return [host_or_traced(x).expand_dims(x, int(dim.reshape(-1)[0]))]


@register_op("Bitcast", dtypes=D.NUMERIC)
def bitcast(ctx, input, *, T, type):
    """Reinterprets the bytes: a wider type takes the last dimension as its bytes, a narrower one adds it."""
    check_dtype(input, "input", T)
    if not isinstance(type, np.dtype) or type == bool or np.issubdtype(type, np.complexfloating) or \
            np.issubdtype(T, np.complexfloating):
        raise Unimplemented(f"type={type}: a bitcast from T={T} to it is not supported: XLA bitcasts integers and "
                            "real floats", attr="type")
    ratio = type.itemsize / T.itemsize
    if ratio > 1 and (np.ndim(input) < 1 or input.shape[-1] != ratio):
        raise InvalidArgument(f"input 'input' has shape {list(np.shape(input))}: a bitcast from {T} to {type} needs "
                              f"a last dimension of {int(ratio)}", input="input")
    return [lax.bitcast_convert_type(input, type)]


@register_op("Cast", type_attr="DstT")
def cast(ctx, x, *, SrcT, DstT, Truncate):
    if not (isinstance(SrcT, np.dtype) and isinstance(DstT, np.dtype)):
        raise Unimplemented(f"a cast from SrcT={SrcT} to DstT={DstT} is not supported: XLA casts numbers and bools",
                            attr="DstT" if isinstance(SrcT, np.dtype) else "SrcT")
    check_dtype(x, "x", SrcT, "SrcT")
    return [jnp.asarray(x).astype(DstT)]


@register_op("Fill", constant_inputs=("dims",))
def fill(ctx, dims, value, *, T, index_type):
    check_dtype(value, "value", T)
    if np.ndim(value):
        raise InvalidArgument(f"input 'value' must be a scalar, but has shape {list(np.shape(value))}",
                              input="value")
    return [jnp.broadcast_to(value, sizes(dims, "dims"))]


@register_op("Empty", type_attr="dtype", constant_inputs=("shape",))
def empty(ctx, shape, *, dtype, init):
    # Uninitialized memory may hold anything; zeros are what init=True asks for and a valid answer otherwise.
    return [jnp.zeros(sizes(shape, "shape"), dtype)]


RANGE_DTYPES = D.FLOAT + D.SIGNED + (np.uint16, np.uint32, np.uint64)


@register_op("Range", type_attr="Tidx", dtypes=RANGE_DTYPES, constant_inputs=("start", "limit", "delta"))
def range_(ctx, start, limit, delta, *, Tidx):
    start, limit, delta = (scalar(v, n) for v, n in ((start, "start"), (limit, "limit"), (delta, "delta")))
    if delta == 0:
        raise InvalidArgument("input 'delta' must not be 0", input="delta")
    if (delta > 0 and start > limit) or (delta < 0 and start < limit):
        raise InvalidArgument(f"input 'start' ({start}) must be {'<=' if delta > 0 else '>='} 'limit' ({limit}) when "
                              f"'delta' is {'positive' if delta > 0 else 'negative'}", input="start")
    if np.issubdtype(Tidx, np.integer):
        count = (abs(int(limit) - int(start)) + abs(int(delta)) - 1) // abs(int(delta))
    else:
        count = int(np.ceil(np.abs((limit - start) / delta)))
    limits.check_shape(f"node {ctx.name!r} (Range): output 0", (count,))
    return [start + np.arange(count).astype(Tidx) * delta]


@register_op("LinSpace", dtypes=D.FLOAT, constant_inputs=("num",))
def lin_space(ctx, start, stop, num, *, T, Tidx):
    num = int(scalar(num, "num"))
    if num <= 0:
        raise InvalidArgument(f"input 'num' must be positive, not {num}", input="num")
    for name, value in (("start", start), ("stop", stop)):
        check_dtype(value, name, T)
        if np.size(value) != 1 or np.ndim(value) > 1:
            raise InvalidArgument(f"input {name!r} must be a scalar, but has shape {list(np.shape(value))}",
                                  input=name)
    start, stop = jnp.reshape(start, ()), jnp.reshape(stop, ())
    if num == 1:
        return [jnp.reshape(start, (1,))]
    step = (stop - start) / jnp.asarray(num - 1, T)
    values = start + step * jnp.arange(num, dtype=T)
    return [values.at[0].set(start).at[-1].set(stop)]  # TF pins both ends exactly
