"""Gather, scatter, stitch and one-hot ops.

TF's CPU kernels reject out-of-range indices at run time, which a compiled program cannot do; as TF's GPU
kernels do, out-of-range (including negative) indices gather zeros and scatter nothing.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D, limits
from xlacs_server.lower.ops.array import INT32, axes, scalar
from xlacs_server.lower.ops.slicing import require_constant
from xlacs_server.lower.registry import register_op

OUT_OF_RANGE = dict(mode="fill", fill_value=0, wrap_negative_indices=False)
DROP_OUT_OF_RANGE = dict(mode="drop", wrap_negative_indices=False)


def take(params, indices, axis: int, batch_dims: int):
    """GatherV2: the leading batch_dims of params and indices are matched pairwise, then params' axis is indexed."""
    if batch_dims:
        return jax.vmap(lambda p, i: take(p, i, axis - 1, batch_dims - 1))(params, indices)
    return params.at[(slice(None),) * axis + (indices,)].get(**OUT_OF_RANGE)


@register_op("Gather", type_attr="Tparams")
def gather(ctx, params, indices, *, Tparams, Tindices, validate_indices=True):
    return [take(jnp.asarray(params), indices, 0, 0)]


@register_op("GatherV2", type_attr="Tparams", constant_inputs=("axis",))
def gather_v2(ctx, params, indices, axis, *, Tparams, Tindices, Taxis, batch_dims=0):
    params = jnp.asarray(params)
    batch_dims = batch_dims % indices.ndim if batch_dims < 0 else batch_dims
    axis = int(scalar(axis, "axis")) % params.ndim
    if axis < batch_dims:
        raise ValueError(f"axis {axis} must not be less than batch_dims {batch_dims}")
    if params.shape[:batch_dims] != indices.shape[:batch_dims]:
        raise ValueError(f"params {list(params.shape)} and indices {list(indices.shape)} differ in their "
                         f"{batch_dims} batch dimension(s)")
    return [take(params, indices, axis, batch_dims)]


def nd_index(indices) -> tuple:
    """The last dimension of GatherNd/ScatterNd indices as a tuple of index arrays, one per indexed dimension."""
    return tuple(indices[..., k] for k in range(indices.shape[-1]))


@register_op("GatherNd", type_attr="Tparams")
def gather_nd(ctx, params, indices, *, Tparams, Tindices, bad_indices_policy=""):
    params = jnp.asarray(params)
    if indices.shape[-1] > params.ndim:
        raise ValueError(f"indices' last dimension {indices.shape[-1]} exceeds params' rank {params.ndim}")
    if indices.shape[-1] == 0:  # every index names the whole of params
        return [jnp.broadcast_to(params, indices.shape[:-1] + params.shape)]
    return [params.at[nd_index(indices)].get(**OUT_OF_RANGE)]


def check_scatter_shapes(tensor_shape, indices, updates) -> None:
    depth = indices.shape[-1]
    want = indices.shape[:-1] + tuple(tensor_shape[depth:])
    if depth > len(tensor_shape) or updates.shape != want:
        raise ValueError(f"updates have shape {list(updates.shape)}; indices {list(indices.shape)} into shape "
                         f"{list(tensor_shape)} need {list(want)}")


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


def tensor_scatter(method, ctx, tensor, indices, updates, *, T, Tindices, bad_indices_policy=""):
    return [scatter_into(method, tensor, indices, updates)]


for _op, (_method, _dtypes) in SCATTERS.items():
    register_op(_op, dtypes=_dtypes)(functools.partial(tensor_scatter, _method))


@register_op("ScatterNdNonAliasingAdd", dtypes=D.NUMERIC)
def scatter_nd_non_aliasing_add(ctx, input, indices, updates, *, T, Tindices, bad_indices_policy=""):
    return [scatter_into("add", input, indices, updates)]


@register_op("ScatterNd", dtypes=D.NUMERIC, constant_inputs=("shape",))
def scatter_nd(ctx, indices, updates, shape, *, T, Tindices, bad_indices_policy=""):
    return [scatter_into("add", jnp.zeros(axes(shape), updates.dtype), indices, updates)]


@register_op("SparseToDense", constant_inputs=("output_shape",))
def sparse_to_dense(ctx, sparse_indices, output_shape, sparse_values, default_value, *, T, Tindices,
                    validate_indices=True):
    shape = axes(output_shape) if output_shape.ndim else ()
    indices = jnp.reshape(sparse_indices, (-1, 1)) if sparse_indices.ndim < 2 else sparse_indices
    values = jnp.broadcast_to(sparse_values, indices.shape[:1])
    dense = jnp.full(shape, jnp.reshape(default_value, ()), T)
    return [dense.at[nd_index(indices)].set(values, **DROP_OUT_OF_RANGE)]


@register_op("DynamicStitch", "ParallelDynamicStitch")
def dynamic_stitch(ctx, *indices_and_data, N, T):
    indices = [require_constant(ctx, i, f"indices {n}").astype(np.int64)
               for n, i in enumerate(indices_and_data[:N])]
    data = indices_and_data[N:]
    tail = data[0].shape[indices[0].ndim:]
    flat_indices = np.concatenate([i.reshape(-1) for i in indices])
    rows = jnp.concatenate([jnp.reshape(d, (-1,) + tail) for d in data] + [jnp.zeros((1,) + tail, T)])
    if flat_indices.size and flat_indices.min() < 0:
        raise ValueError(f"indices must be non-negative, got {int(flat_indices.min())}")
    # Row r of the result is the last data row whose index is r; rows no index names stay zero.
    limits.check_shape(f"node {ctx.name!r} ({ctx.node.op}): output 0", (int(flat_indices.max(initial=-1)) + 1, *tail))
    source = np.full(int(flat_indices.max(initial=-1)) + 1, rows.shape[0] - 1)
    source[flat_indices] = np.arange(flat_indices.size)
    return [jnp.take(rows, source, axis=0)]


@register_op("OneHot", constant_inputs=("depth",))
def one_hot(ctx, indices, depth, on_value, off_value, *, T, TI=np.dtype(np.int64), axis=-1):
    depth = int(scalar(depth, "depth"))
    axis = indices.ndim if axis == -1 else axis
    hot = jnp.expand_dims(indices, axis) == lax.broadcasted_iota(
        indices.dtype, indices.shape[:axis] + (depth,) + indices.shape[axis:], axis)
    return [jnp.where(hot, jnp.reshape(on_value, ()), jnp.reshape(off_value, ()))]


@register_op("UnravelIndex", type_attr="Tidx", dtypes=D.INDEX)
def unravel_index(ctx, indices, dims, *, Tidx=INT32):
    """The coordinates of flat indices in an array of shape `dims`: [len(dims)] + indices' shape."""
    if dims.ndim != 1:
        raise ValueError(f"dims must be a vector, got shape {list(dims.shape)}")
    coordinates, rest = [], indices
    for k in reversed(range(dims.shape[0])):
        coordinates.append(rest % dims[k])
        rest = rest // dims[k]
    return [jnp.stack(coordinates[::-1])]


@register_op("InvertPermutation", dtypes=D.INDEX)
def invert_permutation(ctx, x, *, T=INT32):
    return [jnp.zeros_like(x).at[x].set(jnp.arange(x.shape[0], dtype=x.dtype), **DROP_OUT_OF_RANGE)]
