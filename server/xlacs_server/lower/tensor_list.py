"""The values that stand for TF's TensorLists (DT_VARIANT) and TensorArrays in a lowered program.

XLA has no growable lists, so a list has a static maximum size, as tf2xla's do: a fixed-size buffer
plus a length. Both are pytree leaves, so lists flow through loops and conditionals like tensors.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from xlacs_server.lower import limits
from xlacs_server.lower.checks import InvalidArgument, Unimplemented
from xlacs_server.lower.context import is_constant


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True)
class TensorList:
    """`data` holds `max_size` elements, the first `length` of which are in the list. Until an element
    is written, the element shape may be unknown (-1 dims, or None for an unknown rank) and `data` None."""
    dtype: np.dtype
    max_size: int
    length: Any  # int32 scalar; numpy when known at compile time
    element_shape: tuple | None
    data: Any = None  # [max_size, *element_shape]

    @classmethod
    def new(cls, dtype, max_size: int, length: int, element_shape: tuple | None) -> "TensorList":
        """A list of `length` zero elements: TF reads unwritten elements as zeros."""
        if max_size < 0:
            raise InvalidArgument(f"a list of {max_size} elements: the size must not be negative")
        lst = cls(np.dtype(dtype), max_size, np.asarray(length, np.int32), element_shape)
        return lst.initialized(element_shape) if fully_defined(element_shape) else lst

    def tree_flatten(self):
        children = (self.length,) if self.data is None else (self.length, self.data)
        return children, (self.dtype, self.max_size, self.element_shape, self.data is None)

    @classmethod
    def tree_unflatten(cls, aux, children):
        dtype, max_size, element_shape, empty = aux
        return cls(dtype, max_size, children[0], element_shape, None if empty else children[1])

    def replace(self, **changes) -> "TensorList":
        return dataclasses.replace(self, **changes)

    def initialized(self, element_shape: tuple) -> "TensorList":
        """The list with a zero buffer for elements of `element_shape`."""
        limits.check_shape("a tensor list's buffer", (self.max_size, *element_shape))
        data = np.zeros((self.max_size, *element_shape), self.dtype)
        return self.replace(element_shape=tuple(element_shape), data=data)

    def buffer(self, element_shape: tuple | None = None):
        """The buffer, made of zeros if nothing was written yet; `element_shape` (an op's element_shape
        operand) completes an unknown element shape."""
        if self.data is not None:
            return self.data
        shape = merge_shapes(self.element_shape, element_shape)
        if not fully_defined(shape):
            raise Unimplemented(f"the list's element shape {describe(shape)} is not fully known and no element "
                                "was written to it; XLA needs static shapes: give the list a full element_shape")
        return self.initialized(shape).data

    def for_element(self, shape: tuple) -> "TensorList":
        """The list, ready to hold an element of `shape`: initialized if needed, checked otherwise."""
        try:
            merge_shapes(self.element_shape, tuple(shape))
        except InvalidArgument:
            raise InvalidArgument(f"an element of shape {list(shape)} does not fit a list of elements of shape "
                                  f"{describe(self.element_shape)}") from None
        return self if self.data is not None else self.initialized(shape)

    def zeros_like(self) -> "TensorList":
        return self if self.data is None else self.replace(data=np.zeros(np.shape(self.data), self.dtype))

    def grown(self, count: int) -> "TensorList":
        """The list with `count` more (or, if negative, fewer) elements; the buffer is unchanged."""
        length = self.length + np.int32(count)
        return self.replace(length=np.asarray(length, np.int32) if is_constant(self.length) else length)

    def static_length(self) -> int | None:
        return int(self.length) if is_constant(self.length) else None


def fully_defined(shape: tuple | None) -> bool:
    return shape is not None and all(d >= 0 for d in shape)


def merge_shapes(a: tuple | None, b: tuple | None) -> tuple | None:
    """The most specific shape compatible with both partial shapes."""
    if a is None:
        return b
    if b is None:
        return a
    if len(a) != len(b) or any(x >= 0 and y >= 0 and x != y for x, y in zip(a, b)):
        raise InvalidArgument(f"element shapes {describe(a)} and {describe(b)} are incompatible")
    return tuple(x if x >= 0 else y for x, y in zip(a, b))


def describe(shape: tuple | None) -> str:
    return "<unknown rank>" if shape is None else str([d if d >= 0 else None for d in shape])


def shape_operand(value) -> tuple | None:
    """An element_shape operand: -1 for an unknown rank, else dims with -1 for unknown ones."""
    if not is_constant(value):
        return None
    if value.ndim == 0:
        return None
    return tuple(int(d) for d in value)


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class TensorArrayHandle:
    """A TensorArrayV3 handle. The array's state travels in its flow tensor (a TensorList), the way
    TF1 graphs thread it, so the handle only says what the array holds."""
    dtype: np.dtype
    element_shape: tuple | None


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass
class StackRef:
    """A StackV2 resource: a cell whose value, the stack's elements as a TensorList, each push and pop
    replaces. Passed to a function (a loop body) it travels as that list, and comes back assigned."""
    name: str
    value: TensorList
    assigned: bool = False

    def assign(self, value: TensorList) -> None:
        self.value, self.assigned = value, True

    def tree_flatten(self):
        return (self.value,), self.name

    @classmethod
    def tree_unflatten(cls, name, children):
        return cls(name, children[0])
