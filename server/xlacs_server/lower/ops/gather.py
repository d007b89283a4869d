"""Gather, scatter, stitch and one-hot ops.

TF's CPU kernels reject out-of-range indices at run time, which a compiled program cannot do; as TF's GPU
kernels do, out-of-range (including negative) indices gather zeros and scatter nothing.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.errors import DataDependentShape
from xlacs_server.lower import dtypes as D, limits
from xlacs_server.lower.checks import InvalidArgument, check_axes, check_rank, check_scalar
from xlacs_server.lower.context import is_constant
from xlacs_server.lower.ops.array import scalar
from xlacs_server.lower.ops.broadcast import shape_of
from xlacs_server.lower.registry import register_op

OUT_OF_RANGE = dict(mode="fill", fill_value=0, wrap_negative_indices=False)
DROP_OUT_OF_RANGE = dict(mode="drop", wrap_negative_indices=False)


def take(params, indices, axis: int, batch_dims: int):
    """GatherV2: the leading batch_dims of params and indices are matched pairwise, then params' axis is indexed."""
    if batch_dims:
        return jax.vmap(lambda p, i: take(p, i, axis - 1, batch_dims - 1))(params, indices)
    return params.at[(slice(None),) * axis + (indices,)].get(**OUT_OF_RANGE)


@register_op("Gather", type_attr="Tparams")
def gather(ctx, params, indices, *, Tparams, Tindices, validate_indices):
    check_rank(params, "params", min_rank=1)
    return [take(jnp.asarray(params), indices, 0, 0)]


@register_op("GatherV2", type_attr="Tparams", constant_inputs=("axis",))
def gather_v2(ctx, params, indices, axis, *, Tparams, Tindices, Taxis, batch_dims):
    check_rank(params, "params", min_rank=1)
    if not -indices.ndim <= batch_dims <= indices.ndim:
        raise InvalidArgument(f"batch_dims={batch_dims} is out of range for input 'indices' of rank "
                              f"{indices.ndim}: use a value in [{-indices.ndim}, {indices.ndim}]", attr="batch_dims")
    batch_dims = batch_dims % indices.ndim if batch_dims < 0 else batch_dims
    axis = check_axes(scalar(axis, "axis"), params.ndim, "axis")[0]
    if axis < batch_dims:
        raise InvalidArgument(f"axis {axis} must not be less than batch_dims {batch_dims}", input="axis")
    if params.shape[:batch_dims] != indices.shape[:batch_dims]:
        raise InvalidArgument(f"inputs 'params' {list(params.shape)} and 'indices' {list(indices.shape)} differ in "
                              f"their {batch_dims} batch dimension(s)", input="indices")
    return [take(jnp.asarray(params), indices, axis, batch_dims)]


def nd_index(indices) -> tuple:
    """The last dimension of GatherNd/ScatterNd indices as a tuple of index arrays, one per indexed dimension."""
    return tuple(indices[..., k] for k in range(indices.shape[-1]))


@register_op("GatherNd", type_attr="Tparams")
def gather_nd(ctx, params, indices, *, Tparams, Tindices, bad_indices_policy):
    params = jnp.asarray(params)
    check_rank(params, "params", min_rank=1)
    check_rank(indices, "indices", min_rank=1)
    if indices.shape[-1] > params.ndim:
        raise InvalidArgument(f"input 'indices' has shape {list(indices.shape)}: its last dimension (the length of "
                              f"an index) must not exceed the rank {params.ndim} of input 'params'", input="indices")
    if indices.shape[-1] == 0:  # every index names the whole of params
        return [jnp.broadcast_to(params, indices.shape[:-1] + params.shape)]
    return [params.at[nd_index(indices)].get(**OUT_OF_RANGE)]


def check_scatter_shapes(tensor_shape, indices, updates) -> None:
    check_rank(indices, "indices", min_rank=1)
    depth = indices.shape[-1]
    if depth > len(tensor_shape):
        raise InvalidArgument(f"input 'indices' has shape {list(indices.shape)}: its last dimension (the length of "
                              f"an index) must not exceed the rank of the shape {list(tensor_shape)}",
                              input="indices")
    want = indices.shape[:-1] + tuple(tensor_shape[depth:])
    if updates.shape != want:
        raise InvalidArgument(f"input 'updates' has shape {list(updates.shape)}; indices {list(indices.shape)} "
                              f"into shape {list(tensor_shape)} need {list(want)}", input="updates")


# TF op -> (the .at[] method it applies, allowed dtypes)
SCATTERS = {
    "TensorScatterUpdate": ("set", D.ALL),
    "TensorScatterAdd": ("add", D.NUMERIC),
    "TensorScatterSub": ("subtract", D.NUMERIC),
    "TensorScatterMax": ("max", D.REAL),
    "TensorScatterMin": ("min", D.REAL),
}


def scatter_into(method: str, tensor, indices, updates):
    check_scatter_shapes(tensor.shape, indices, updates)
    if method == "subtract":
        method, updates = "add", -updates
    return getattr(jnp.asarray(tensor).at[nd_index(indices)], method)(updates, **DROP_OUT_OF_RANGE)


def tensor_scatter(method, ctx, tensor, indices, updates, *, T, Tindices, bad_indices_policy):
    return [scatter_into(method, tensor, indices, updates)]


for _op, (_method, _dtypes) in SCATTERS.items():
    register_op(_op, dtypes=_dtypes)(functools.partial(tensor_scatter, _method))


@register_op("ScatterNdNonAliasingAdd", dtypes=D.NUMERIC)
def scatter_nd_non_aliasing_add(ctx, input, indices, updates, *, T, Tindices, bad_indices_policy):
    return [scatter_into("add", input, indices, updates)]


@register_op("ScatterNd", dtypes=D.NUMERIC, constant_inputs=("shape",))
def scatter_nd(ctx, indices, updates, shape, *, T, Tindices, bad_indices_policy):
    return [scatter_into("add", jnp.zeros(shape_of(shape, "shape"), updates.dtype), indices, updates)]


@register_op("SparseToDense", constant_inputs=("output_shape",))
def sparse_to_dense(ctx, sparse_indices, output_shape, sparse_values, default_value, *, T, Tindices, validate_indices):
    shape = shape_of(output_shape, "output_shape") if output_shape.ndim else ()
    if sparse_indices.ndim > 2:
        raise InvalidArgument(f"input 'sparse_indices' has shape {list(sparse_indices.shape)}; it must be a scalar, "
                              "a vector or a matrix", input="sparse_indices")
    indices = jnp.reshape(sparse_indices, (-1, 1)) if sparse_indices.ndim < 2 else sparse_indices
    if indices.shape[1] != len(shape):
        raise InvalidArgument(f"input 'sparse_indices' has shape {list(sparse_indices.shape)}: its indices have "
                              f"{indices.shape[1]} coordinate(s), but output_shape {list(shape)} has {len(shape)} "
                              "dimension(s)", input="sparse_indices")
    if np.ndim(sparse_values) > 1 or np.size(sparse_values) not in (1, indices.shape[0]):
        raise InvalidArgument(f"input 'sparse_values' has shape {list(np.shape(sparse_values))}; it must be a scalar "
                              f"or a vector of {indices.shape[0]} value(s), one per index", input="sparse_values")
    check_scalar(default_value, "default_value")
    values = jnp.broadcast_to(sparse_values, indices.shape[:1])
    dense = jnp.full(shape, jnp.reshape(default_value, ()), T)
    return [dense.at[nd_index(indices)].set(values, **DROP_OUT_OF_RANGE)]


@register_op("DynamicStitch", "ParallelDynamicStitch")
def dynamic_stitch(ctx, *indices_and_data, N, T):
    indices, data = indices_and_data[:N], indices_and_data[N:]
    for n, i in enumerate(indices):
        if not is_constant(i):  # the output has max(indices) + 1 rows
            raise DataDependentShape(ctx.name, ctx.node.op, f"indices[{n}]")
    tail = data[0].shape[indices[0].ndim:]
    for n, (i, d) in enumerate(zip(indices, data)):
        if d.shape != i.shape + tail:
            raise InvalidArgument(f"data[{n}] has shape {list(d.shape)}; it must be indices[{n}]'s shape "
                                  f"{list(i.shape)} followed by {list(tail)}", input=f"data[{n}]")
    flat_indices = np.concatenate([i.reshape(-1) for i in indices]).astype(np.int64)
    rows = jnp.concatenate([jnp.reshape(d, (-1,) + tail) for d in data] + [jnp.zeros((1,) + tail, T)])
    if flat_indices.size and flat_indices.min() < 0:
        raise InvalidArgument(f"indices hold {int(flat_indices.min())}; they must be non-negative", input="indices")
    # Row r of the result is the last data row whose index is r; rows no index names stay zero.
    limits.check_shape(f"node {ctx.name!r} ({ctx.node.op}): output 0", (int(flat_indices.max(initial=-1)) + 1, *tail))
    source = np.full(int(flat_indices.max(initial=-1)) + 1, rows.shape[0] - 1)
    source[flat_indices] = np.arange(flat_indices.size)
    return [jnp.take(rows, source, axis=0)]


@register_op("OneHot", constant_inputs=("depth",))
def one_hot(ctx, indices, depth, on_value, off_value, *, T, TI, axis):
    check_scalar(depth, "depth")
    if depth < 0:
        raise InvalidArgument(f"input 'depth' is {int(depth)}; it must be non-negative", input="depth")
    depth = int(depth)
    if not -1 <= axis <= indices.ndim:
        raise InvalidArgument(f"axis={axis} must be -1 or in [0, {indices.ndim}], the rank of input 'indices'",
                              attr="axis")
    check_scalar(on_value, "on_value")
    check_scalar(off_value, "off_value")
    axis = indices.ndim if axis == -1 else axis
    hot = jnp.expand_dims(indices, axis) == lax.broadcasted_iota(
        indices.dtype, indices.shape[:axis] + (depth,) + indices.shape[axis:], axis)
    return [jnp.where(hot, jnp.reshape(on_value, ()), jnp.reshape(off_value, ()))]


@register_op("UnravelIndex", type_attr="Tidx", dtypes=D.INDEX)
def unravel_index(ctx, indices, dims, *, Tidx):
    """The coordinates of flat indices in an array of shape `dims`: [len(dims)] + indices' shape."""
    check_rank(dims, "dims", rank=1)
    if indices.ndim > 1:
        raise InvalidArgument(f"input 'indices' has shape {list(indices.shape)}; it must be a scalar or a vector",
                              input="indices")
    coordinates, rest = [], indices
    for k in reversed(range(dims.shape[0])):
        coordinates.append(rest % dims[k])
        rest = rest // dims[k]
    return [jnp.stack(coordinates[::-1])]


@register_op("InvertPermutation", dtypes=D.INDEX)
def invert_permutation(ctx, x, *, T):
    check_rank(x, "x", rank=1)
    return [jnp.zeros_like(x).at[x].set(jnp.arange(x.shape[0], dtype=x.dtype), **DROP_OUT_OF_RANGE)]
