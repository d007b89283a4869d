"""What lowering rules check, as TF's kernels do with OP_REQUIRES: the errors they raise and shared checks.

Rules and the helpers they call raise InvalidArgument (the graph's fault: TF would refuse the node too) or
Unimplemented (TF accepts it, xlacs does not lower it), naming the input or attr at fault. They need no node:
the engine reports them against the node being lowered. Any other exception from a rule is a bug of xlacs
(INTERNAL, see engine.py).
"""
from __future__ import annotations

import numpy as np

from xlacs_server.errors import InvalidNode, NodeError, UnsupportedNode
from xlacs_server.graph.op_defs import op_def


class KernelError(Exception):
    error: type[NodeError]

    def __init__(self, reason: str, *, attr: str | None = None, input: str | None = None):
        super().__init__(reason)
        self.attr, self.input = attr, input

    def at(self, node: str, op: str) -> NodeError:
        return self.error(node, op, str(self), attr=self.attr, input=self.input)


class InvalidArgument(KernelError):
    error = InvalidNode


class Unimplemented(KernelError):
    error = UnsupportedNode


def check_rank(x, input: str, *, rank: int | None = None, min_rank: int | None = None) -> None:
    ndim = np.ndim(x)
    if rank is not None and ndim != rank:
        raise InvalidArgument(f"input {input!r} must have rank {rank}, but has shape {list(np.shape(x))}",
                              input=input)
    if min_rank is not None and ndim < min_rank:
        raise InvalidArgument(f"input {input!r} must have rank at least {min_rank}, but has shape "
                              f"{list(np.shape(x))}", input=input)


def check_scalar(x, input: str) -> None:
    check_rank(x, input, rank=0)


def broadcast_shape(*shapes: tuple[int, ...], inputs: tuple[str, ...] = ("x", "y")) -> tuple[int, ...]:
    """The shape that operands of `shapes` broadcast to, as TF's BCast; incompatible shapes name the inputs."""
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        listed = ", ".join(f"{name} {list(shape)}" for name, shape in zip(inputs, shapes))
        raise InvalidArgument(f"incompatible shapes for broadcasting: {listed}", input=inputs[-1]) from None


def check_axis(axis: int, rank: int, input: str = "axis") -> int:
    """`axis` in [-rank, rank), made non-negative."""
    if not -rank <= axis < max(rank, 1):
        raise InvalidArgument(f"{input} {axis} is out of range for a tensor of rank {rank}: use a value in "
                              f"[{-rank}, {rank})", input=input)
    return axis % max(rank, 1)


def check_axes(values, rank: int, input: str = "axis", *, unique: bool = True) -> tuple[int, ...]:
    """A constant list of axes (of any shape, read flat), each in [-rank, rank) and, if `unique`, none named
    twice, as TF's reductions and ReverseV2 require; made non-negative, in the order given."""
    found: list[int] = []
    for axis in np.ravel(values).tolist():
        if not -rank <= axis < rank:
            raise InvalidArgument(f"input {input!r} holds axis {axis}, out of range for a tensor of rank {rank}: "
                                  f"use values in [{-rank}, {rank})", input=input)
        if unique and axis % rank in found:
            raise InvalidArgument(f"input {input!r} names axis {axis % rank} twice ({np.ravel(values).tolist()}): "
                                  "name each axis once", input=input)
        found.append(axis % rank)
    return tuple(found)


def check_axis_attr(axis: int, rank: int, attr: str) -> int:
    """An axis attr in [-rank, rank), made non-negative."""
    if not -rank <= axis < rank:
        raise InvalidArgument(f"{attr}={axis} is out of range for a tensor of rank {rank}: use a value in "
                              f"[{-rank}, {rank})", attr=attr)
    return axis % rank


def check_dtype(x, input: str, dtype, attr: str = "T") -> None:
    """Input `input` is a tensor of `dtype`, the value of the node's type attr `attr`: TF refuses a graph whose
    edge carries another type."""
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):
        raise InvalidArgument(f"input {input!r} is a {type(x).__name__}, not a tensor", input=input)
    if isinstance(dtype, np.dtype) and np.dtype(x.dtype) != dtype:
        raise InvalidArgument(f"input {input!r} has dtype {np.dtype(x.dtype).name}, but {attr} is {dtype.name}: "
                              f"give it a {dtype.name} tensor or change {attr}", input=input)


def input_names(op: str) -> list[str]:
    """The names of `op`'s input args, as TF's OpDef has them (`values` for N tensors of arg `values`)."""
    definition = op_def(op)
    return [] if definition is None else [arg.name for arg in definition.input_arg]


def check_dtypes(op: str, inputs, dtype, attr: str = "T") -> None:
    """Each of `inputs`, the leading inputs of an `op` node, is a tensor of `dtype` (the node's attr `attr`)."""
    for name, x in zip(input_names(op), inputs):
        check_dtype(x, name, dtype, attr)


def check_same_shapes(op: str, inputs, dtype, attr: str = "T") -> None:
    """The leading `inputs` of an `op` node are tensors of `dtype` of one shape, as TF's elementwise gradient
    kernels require."""
    check_dtypes(op, inputs, dtype, attr)
    names = input_names(op)
    for name, x in zip(names[1:], inputs[1:]):
        if np.shape(x) != np.shape(inputs[0]):
            raise InvalidArgument(f"input {name!r} has shape {list(np.shape(x))}, but {names[0]!r} has "
                                  f"{list(np.shape(inputs[0]))}: they must be the same", input=name)
