"""Resource-variable ops on the VariableRef values that the engine binds for each variable input."""
import numpy as np

from xlacs_server.errors import InvalidRequest
from xlacs_server.lower.ops.gather import take
from xlacs_server.lower.ops.slicing import strided_index
from xlacs_server.lower.registry import register_op


@register_op("VarHandleOp", type_attr="dtype", foldable=False)
def var_handle(ctx, *, dtype, shape, container="", shared_name="", debug_name="", allowed_devices=()):
    raise InvalidRequest(f"variable {ctx.name!r} has no value: supply it at Execute")


@register_op("ReadVariableOp", type_attr="dtype", foldable=False)
def read_variable(ctx, resource, *, dtype):
    return [resource.value]


@register_op("AssignVariableOp", type_attr="dtype", foldable=False)
def assign_variable(ctx, resource, value, *, dtype, validate_shape=False):
    resource.assign(value)
    return []


@register_op("AssignAddVariableOp", "AssignSubVariableOp", type_attr="dtype", foldable=False)
def assign_add_variable(ctx, resource, value, *, dtype):
    resource.assign(resource.value + value if ctx.node.op == "AssignAddVariableOp" else resource.value - value)
    return []


@register_op("ResourceGather", type_attr="dtype", foldable=False)
def resource_gather(ctx, resource, indices, *, dtype, Tindices, batch_dims=0, validate_indices=True):
    return [take(resource.value, indices, batch_dims, batch_dims)]


@register_op("ResourceScatterUpdate", type_attr="dtype", foldable=False)
def resource_scatter_update(ctx, resource, indices, updates, *, dtype, Tindices):
    resource.assign(resource.value.at[indices].set(updates))
    return []


@register_op("ResourceStridedSliceAssign", constant_inputs=("begin", "end", "strides"), foldable=False)
def resource_strided_slice_assign(ctx, ref, begin, end, strides, value, *, T, Index, begin_mask=0, end_mask=0,
                                  ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0):
    index = strided_index(begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
    ref.assign(ref.value.at[index].set(value))
    return []


@register_op("VariableShape", type_attr="out_type", foldable=False)
def variable_shape(ctx, input, *, out_type=np.dtype(np.int32)):
    return [np.array(input.value.shape, dtype=out_type)]


@register_op("VarIsInitializedOp", foldable=False)
def var_is_initialized(ctx, resource):
    return [np.array(True)]
