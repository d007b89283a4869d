"""Resource-variable ops on the VariableRef values that the engine binds for each variable input."""
import numpy as np

from xlacs_server.errors import InvalidRequest
from xlacs_server.lower.checks import InvalidArgument
from xlacs_server.lower.ops.gather import take
from xlacs_server.lower.ops.slicing import check_sliced, strided_index
from xlacs_server.lower.registry import register_op


@register_op("VarHandleOp", type_attr="dtype", foldable=False)
def var_handle(ctx, *, dtype, shape, container, shared_name, debug_name, allowed_devices):
    raise InvalidRequest(f"variable {ctx.name!r} has no value: supply it at Execute")


@register_op("ReadVariableOp", type_attr="dtype", foldable=False)
def read_variable(ctx, resource, *, dtype):
    return [resource.value]


@register_op("AssignVariableOp", type_attr="dtype", foldable=False)
def assign_variable(ctx, resource, value, *, dtype, validate_shape):
    resource.assign(value)
    return []


@register_op("AssignAddVariableOp", "AssignSubVariableOp", type_attr="dtype", foldable=False)
def assign_add_variable(ctx, resource, value, *, dtype):
    resource.assign(resource.value + value if ctx.node.op == "AssignAddVariableOp" else resource.value - value)
    return []


@register_op("ResourceGather", type_attr="dtype", foldable=False)
def resource_gather(ctx, resource, indices, *, dtype, Tindices, batch_dims, validate_indices):
    if not 0 <= batch_dims <= min(indices.ndim, resource.value.ndim - 1):
        raise InvalidArgument(f"batch_dims={batch_dims} must be in [0, {min(indices.ndim, resource.value.ndim - 1)}] "
                              f"for input 'indices' {list(indices.shape)} into variable {resource.name!r} "
                              f"{list(resource.value.shape)}", attr="batch_dims")
    if resource.value.shape[:batch_dims] != indices.shape[:batch_dims]:
        raise InvalidArgument(f"input 'indices' {list(indices.shape)} and variable {resource.name!r} "
                              f"{list(resource.value.shape)} differ in their {batch_dims} batch dimension(s)",
                              input="indices")
    return [take(resource.value, indices, batch_dims, batch_dims)]


@register_op("ResourceScatterUpdate", type_attr="dtype", foldable=False)
def resource_scatter_update(ctx, resource, indices, updates, *, dtype, Tindices):
    want = tuple(indices.shape) + tuple(resource.value.shape[1:])
    if np.shape(updates) not in (want, ()):
        raise InvalidArgument(f"input 'updates' has shape {list(np.shape(updates))}; rows {list(indices.shape)} of "
                              f"variable {resource.name!r} {list(resource.value.shape)} need {list(want)} or a "
                              "scalar", input="updates")
    resource.assign(resource.value.at[indices].set(updates))
    return []


@register_op("ResourceStridedSliceAssign", constant_inputs=("begin", "end", "strides"), foldable=False)
def resource_strided_slice_assign(ctx, ref, begin, end, strides, value, *, T, Index, begin_mask, end_mask,
                                  ellipsis_mask, new_axis_mask, shrink_axis_mask):
    shape = ref.value.shape
    index = strided_index(shape, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                          shrink_axis_mask, input="ref")
    check_sliced(value, shape, index, "value")
    ref.assign(ref.value.at[index].set(value))
    return []


@register_op("VariableShape", type_attr="out_type", foldable=False)
def variable_shape(ctx, input, *, out_type):
    return [np.array(input.value.shape, dtype=out_type)]


@register_op("VarIsInitializedOp", foldable=False)
def var_is_initialized(ctx, resource):
    return [np.array(True)]
