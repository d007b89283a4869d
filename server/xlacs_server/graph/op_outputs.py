"""What TF's OpDefs say about a node's outputs: their arg names, how many tensors each arg holds, dtypes.

FunctionDefs name tensors `node:output_arg:index`; a graph names them by flat position. Converting
between the two needs each op's output args, which come from TF's OpDefs (op_defs.py), so the daemon never
imports TensorFlow.
"""
from __future__ import annotations

from typing import NamedTuple

from xlacs.v1 import tf_graph_pb2 as tf
from xlacs_server.graph.attrs import decode
from xlacs_server.graph.ir import Node
from xlacs_server.graph.op_defs import op_def


class OutputSlice(NamedTuple):
    name: str
    start: int  # the flat index of the arg's first tensor
    count: int


def output_slices(node: Node) -> list[OutputSlice] | None:
    """Where each output arg of `node` sits among its flat outputs; None for an op TF does not know."""
    definition = op_def(node.op)
    if definition is None:
        return None
    slices, start = [], 0
    for arg in definition.output_arg:
        if arg.number_attr:
            count = int(node.attrs.get(arg.number_attr, 0))
        elif arg.type_list_attr:
            count = len(node.attrs.get(arg.type_list_attr, []))
        else:
            count = 1
        slices.append(OutputSlice(arg.name, start, count))
        start += count
    return slices


def flat_index(node: Node, arg_name: str, index: int) -> int:
    """The flat output position of `node:arg_name:index`. An op TF does not know is taken to have one
    output arg, whatever its name; such a node has no lowering anyway, which check reports."""
    slices = output_slices(node)
    if slices is None:
        return index
    for s in slices:
        if s.name == arg_name:
            if not 0 <= index < s.count:
                raise ValueError(f"output {arg_name!r} of {node.op} node {node.name!r} has {s.count} "
                                 f"tensor(s); index {index} is out of range")
            return s.start + index
    raise ValueError(f"{node.op} has no output named {arg_name!r}; it has {[s.name for s in slices]}")


def arg_of(node: Node, index: int) -> tuple[str, int]:
    """The inverse of flat_index: (output arg name, index within the arg)."""
    slices = output_slices(node)
    for s in [OutputSlice("output", 0, index + 1)] if slices is None else slices:
        if s.start <= index < s.start + s.count:
            return s.name, index - s.start
    raise ValueError(f"{node.op} node {node.name!r} has no output {index}")


def output_dtype(node: Node, index: int):
    """The dtype of output `index` (np.dtype or OpaqueDType), or None when the OpDef and attrs do not say."""
    definition = op_def(node.op)
    if definition is None:
        return None
    name, within = arg_of(node, index)
    arg = next(a for a in definition.output_arg if a.name == name)
    if arg.type_list_attr:
        listed = node.attrs.get(arg.type_list_attr, [])
        return listed[within] if within < len(listed) else None
    if arg.type_attr:
        return node.attrs.get(arg.type_attr)
    return decode(tf.AttrValue(type=arg.type), 0)
