"""TensorList, TensorArrayV3 and StackV2 ops on fixed-size buffers (see tensor_list.py).

Sizes must be compile-time constants, as in tf2xla. Where TF would fail at run time on an index past
the end, XLA clamps it. A list whose length is only known at run time stacks to its whole buffer.
"""
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower.checks import InvalidArgument, Unimplemented, check_scalar
from xlacs_server.lower.registry import register_op
from xlacs_server.lower.tensor_list import StackRef, TensorArrayHandle, TensorList, merge_shapes, shape_operand


def _static_size(value, input: str, *, bound: bool = False) -> int:
    """A list's size, or its bound (`bound`), where TF takes a negative one for "unbounded", which XLA's
    fixed-size buffers cannot be."""
    check_scalar(value, input)
    size = int(value)
    if size < 0 and bound:
        raise Unimplemented(f"input {input!r} is {size} (unbounded); XLA lists have a static size: give it a "
                            "non-negative bound", input=input)
    if size < 0:
        raise InvalidArgument(f"input {input!r} is {size}; a size must not be negative", input=input)
    return size


def _filled(dtype, elements, element_shape) -> TensorList:
    """A full list holding `elements` (stacked along the first dimension)."""
    merge_shapes(element_shape, tuple(elements.shape[1:]))  # raises when they disagree
    size = elements.shape[0]
    return TensorList(np.dtype(dtype), size, np.asarray(size, np.int32), tuple(elements.shape[1:]), elements)


def _get(lst: TensorList, index, element_shape=None):
    return lax.dynamic_index_in_dim(lst.buffer(element_shape), index, keepdims=False)


def _set(lst: TensorList, index, item) -> TensorList:
    lst = lst.for_element(np.shape(item))
    return lst.replace(data=lax.dynamic_update_index_in_dim(lst.data, jnp.asarray(item, lst.dtype), index, 0))


def _push(lst: TensorList, item) -> TensorList:
    length = lst.static_length()
    if length is not None and length >= lst.max_size:
        raise InvalidArgument(f"pushing onto a full list: it was made with room for {lst.max_size} element(s)")
    return _set(lst, lst.length, item).grown(1)


def _pop(lst: TensorList, element_shape=None) -> tuple[TensorList, object]:
    if lst.static_length() == 0:
        raise InvalidArgument("popping from an empty list")
    popped = lst.grown(-1)
    return popped, _get(lst, popped.length, element_shape)


def _stack(lst: TensorList, element_shape=None):
    data = lst.buffer(element_shape)
    length = lst.static_length()
    return data if length is None or length == lst.max_size else data[:length]


def _gather(lst: TensorList, indices, element_shape=None):
    return jnp.take(lst.buffer(element_shape), indices, axis=0, mode="clip")


def _concat(lst: TensorList, element_shape=None):
    """The elements joined along their first dimension, and each element's length in it."""
    length = lst.static_length()
    if length is None:
        raise Unimplemented("concatenating a list whose length is known only at run time: the result's shape "
                            "would depend on it")
    elements = _stack(lst, element_shape)
    if elements.ndim < 2:
        raise InvalidArgument("concatenation needs elements of rank at least 1, but the elements are scalars")
    joined = jnp.reshape(elements, (length * elements.shape[1], *elements.shape[2:]))
    return [joined, np.full((length,), elements.shape[1], np.int64)]


# --- TensorList ---------------------------------------------------------------------------------------

@register_op("TensorListReserve", type_attr="element_dtype", constant_inputs=("num_elements",))
def tensor_list_reserve(ctx, element_shape, num_elements, *, element_dtype, shape_type):
    size = _static_size(num_elements, "num_elements")
    return [TensorList.new(element_dtype, size, size, shape_operand(element_shape))]


@register_op("EmptyTensorList", type_attr="element_dtype", constant_inputs=("max_num_elements",))
def empty_tensor_list(ctx, element_shape, max_num_elements, *, element_dtype, shape_type):
    size = _static_size(max_num_elements, "max_num_elements", bound=True)
    return [TensorList.new(element_dtype, size, 0, shape_operand(element_shape))]


@register_op("TensorListFromTensor", type_attr="element_dtype")
def tensor_list_from_tensor(ctx, tensor, element_shape, *, element_dtype, shape_type):
    if np.ndim(tensor) == 0:
        raise InvalidArgument("input 'tensor' is a scalar; a list is made from a tensor of rank at least 1",
                              input="tensor")
    return [_filled(element_dtype, tensor, shape_operand(element_shape))]


@register_op("TensorListGetItem", type_attr="element_dtype")
def tensor_list_get_item(ctx, input_handle, index, element_shape, *, element_dtype, Tshape):
    return [_get(input_handle, index, shape_operand(element_shape))]


@register_op("TensorListSetItem", type_attr="element_dtype")
def tensor_list_set_item(ctx, input_handle, index, item, *, element_dtype, resize_if_index_out_of_bounds):
    if resize_if_index_out_of_bounds:
        raise Unimplemented("resize_if_index_out_of_bounds=True grows the list at run time; XLA lists have a "
                            "static size", attr="resize_if_index_out_of_bounds")
    return [_set(input_handle, index, item)]


@register_op("TensorListStack", type_attr="element_dtype")
def tensor_list_stack(ctx, input_handle, element_shape, *, element_dtype, num_elements):
    return [_stack(input_handle, shape_operand(element_shape))]


@register_op("TensorListGather", type_attr="element_dtype")
def tensor_list_gather(ctx, input_handle, indices, element_shape, *, element_dtype):
    return [_gather(input_handle, indices, shape_operand(element_shape))]


@register_op("TensorListConcatV2", type_attr="element_dtype")
def tensor_list_concat_v2(ctx, input_handle, element_shape, leading_dims, *, element_dtype, shape_type):
    return _concat(input_handle, shape_operand(element_shape))


@register_op("TensorListLength")
def tensor_list_length(ctx, input_handle):
    return [input_handle.length]


@register_op("TensorListElementShape", type_attr="shape_type")
def tensor_list_element_shape(ctx, input_handle, *, shape_type):
    shape = input_handle.element_shape
    return [np.asarray(-1 if shape is None else shape, shape_type)]


@register_op("TensorListPushBack", type_attr="element_dtype")
def tensor_list_push_back(ctx, input_handle, tensor, *, element_dtype):
    return [_push(input_handle, tensor)]


@register_op("TensorListPopBack", type_attr="element_dtype")
def tensor_list_pop_back(ctx, input_handle, element_shape, *, element_dtype):
    return list(_pop(input_handle, shape_operand(element_shape)))


# --- TensorArrayV3: the state is the flow value ---------------------------------------------------------

@register_op("TensorArrayV3", type_attr="dtype", constant_inputs=("size",))
def tensor_array(ctx, size, *, dtype, element_shape, dynamic_size, clear_after_read, identical_element_shapes,
                 tensor_array_name):
    if dynamic_size:
        raise Unimplemented("dynamic_size=True grows the array at run time; XLA arrays have a static size",
                            attr="dynamic_size")
    size = _static_size(size, "size")
    shape = None if element_shape is None else tuple(element_shape)
    return [TensorArrayHandle(np.dtype(dtype), shape), TensorList.new(dtype, size, size, shape)]


@register_op("TensorArrayReadV3", type_attr="dtype")
def tensor_array_read(ctx, handle, index, flow_in, *, dtype):
    return [_get(flow_in, index, handle.element_shape)]


@register_op("TensorArrayWriteV3")
def tensor_array_write(ctx, handle, index, value, flow_in, *, T):
    return [_set(flow_in, index, value)]


@register_op("TensorArrayGatherV3", type_attr="dtype")
def tensor_array_gather(ctx, handle, indices, flow_in, *, dtype, element_shape):
    return [_gather(flow_in, indices, handle.element_shape if element_shape is None else tuple(element_shape))]


@register_op("TensorArrayScatterV3")
def tensor_array_scatter(ctx, handle, indices, value, flow_in, *, T):
    lst = flow_in.for_element(np.shape(value)[1:])
    return [lst.replace(data=jnp.asarray(lst.data).at[indices].set(jnp.asarray(value, lst.dtype), mode="clip"))]


@register_op("TensorArrayConcatV3", type_attr="dtype")
def tensor_array_concat(ctx, handle, flow_in, *, dtype, element_shape_except0):
    return _concat(flow_in, handle.element_shape)


@register_op("TensorArraySplitV3", constant_inputs=("lengths",))
def tensor_array_split(ctx, handle, value, lengths, flow_in, *, T):
    lengths = [int(n) for n in np.ravel(lengths)]
    if sum(lengths) != np.shape(value)[0] or min(lengths, default=0) < 0:
        raise InvalidArgument(f"input 'lengths' {lengths} must be non-negative and sum to the {np.shape(value)[0]} "
                              "rows of input 'value'", input="lengths")
    if len(lengths) != flow_in.max_size or len(set(lengths)) > 1:
        raise Unimplemented(f"splitting into lengths {lengths}: XLA arrays hold {flow_in.max_size} elements of "
                            "one shape, so the lengths must be equal and one per element", input="lengths")
    pieces = jnp.reshape(value, (len(lengths), lengths[0] if lengths else 0, *np.shape(value)[1:]))
    return [_filled(flow_in.dtype, pieces, flow_in.element_shape)]


@register_op("TensorArraySizeV3")
def tensor_array_size(ctx, handle, flow_in):
    return [np.asarray(flow_in.max_size, np.int32)]


@register_op("TensorArrayCloseV3")
def tensor_array_close(ctx, handle):
    return []


@register_op("TensorArrayGradV3")
def tensor_array_grad(ctx, handle, flow_in, *, source):
    """The gradient array of `handle`: same size and shape, all zeros; its state starts at flow_out."""
    return [handle, flow_in.zeros_like()]


# --- StackV2: a cell holding a TensorList; pushes and pops assign it, so they never fold ----------------

@register_op("StackV2", type_attr="elem_type", constant_inputs=("max_size",), foldable=False)
def stack(ctx, max_size, *, elem_type, stack_name):
    # TF1 bounds the stacks of while-loop gradients only when it builds them in an XLA context.
    size = _static_size(max_size, "max_size", bound=True)
    return [StackRef(stack_name or ctx.name, TensorList.new(elem_type, size, 0, None))]


@register_op("StackPushV2", foldable=False)
def stack_push(ctx, handle, elem, *, T, swap_memory):
    handle.assign(_push(handle.value, elem))
    return [elem]


@register_op("StackPopV2", type_attr="elem_type", foldable=False)
def stack_pop(ctx, handle, *, elem_type):
    rest, top = _pop(handle.value)
    handle.assign(rest)
    return [top]


@register_op("StackCloseV2", foldable=False)
def stack_close(ctx, handle):
    return []
