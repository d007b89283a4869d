"""Freezes a SavedModel signature's graph: each resource variable its outputs read becomes a Const of the
variable's checkpoint value in the graph (not in a function), so that the daemon receives a frozen GraphDef whose
weights it lifts (docs/cache.md), and which compiles by digest like any other.

In a SavedModel written by TensorFlow 2, a signature's outputs come from a call (StatefulPartitionedCall) in the
MetaGraphDef's graph to a library function, whose last inputs are its captures: the VarHandleOps of the
variables it reads, in the order of the function's `bound_inputs` in the object graph. Inside, a variable is a
resource argument, read by ReadVariableOp or passed on to further calls. Freezing replaces each such VarHandleOp
with a Const of the variable's value and specializes the functions it flows into: the resource argument becomes
an argument of the value's dtype, each ReadVariableOp of it an Identity, and each call that passes it on calls
the callee specialized in turn. Any other use of a variable (an assignment, a gather from it, a loop carrying
it) is refused naming the op, node and function."""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from xlacs import dtypes
from xlacs.v1 import tf_graph_pb2 as tf

CALL_OPS = ("StatefulPartitionedCall", "PartitionedCall")


class FreezeError(ValueError):
    """A graph that xlacs cannot freeze: a variable used other than read, or captures that do not add up."""


def _node_name(ref: str) -> str:
    return ref.lstrip("^").split(":")[0]


def _const(name: str, value: np.ndarray) -> tf.NodeDef:
    node = tf.NodeDef(name=name, op="Const")
    node.attr["dtype"].type = dtypes.from_numpy(value.dtype)
    tensor = node.attr["value"].tensor
    tensor.dtype = node.attr["dtype"].type
    tensor.tensor_shape.dim.extend(tf.TensorShapeProto.Dim(size=d) for d in value.shape)
    tensor.tensor_content = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).tobytes()
    return node


def _retype_inputs(node: tf.NodeDef, types: Mapping[int, int]) -> None:
    """Sets the Tin entries of a call node's data inputs at `types`' positions."""
    for k, dtype in types.items():
        node.attr["Tin"].list.type[k] = dtype
    node.attr.pop("_read_only_resource_inputs", None)  # indices of resource inputs, which these are no longer


class Freezer:
    """value(variable) gives a variable's checkpoint value; variables are named by their object graph node."""

    def __init__(self, graph_def: tf.GraphDef, bound_inputs: Mapping[str, Sequence[int]],
                 value: Callable[[int], np.ndarray], graph_value: Callable[[str], np.ndarray] | None = None):
        self.graph_def = graph_def
        self.functions = {f.signature.name: f for f in graph_def.library.function}
        self.bound_inputs = bound_inputs
        self.value = value
        # A TensorFlow 1 graph's variable (no object graph: Estimator, tf.compat.v1 Builder) by its checkpoint key.
        self.graph_value = graph_value
        self.specialized: dict[tuple, str] = {}  # (function, ((arg position, variable), ...)) -> its name
        self.new_functions: list[tf.FunctionDef] = []

    def freeze(self, fetches: Sequence[str]) -> tf.GraphDef:
        """The GraphDef of the nodes `fetches` reach, with the functions they call, variables frozen."""
        nodes = {n.name: n for n in self.graph_def.node}
        kept: dict[str, tf.NodeDef] = {}
        variables: dict[str, int] = {}  # VarHandleOp -> the variable its calls' bound_inputs say it is
        pending = [_node_name(f) for f in fetches]
        while pending:
            name = pending.pop()
            if name in kept:
                continue
            if name not in nodes:
                raise FreezeError(f"the graph has no node {name!r}")
            node = kept[name] = tf.NodeDef()
            node.CopyFrom(nodes[name])
            if node.op in CALL_OPS:
                variables.update(self._bind_captures(node, nodes))
            pending.extend(_node_name(i) for i in node.input)
        graph_variables = {}
        for name, node in kept.items():
            if node.op == "VarHandleOp" and name in variables:
                node.CopyFrom(_const(name, self.value(variables[name])))
            elif node.op in ("VarHandleOp", "VariableV2"):
                if self.graph_value is None:
                    raise FreezeError(f"variable {name!r} is read outside a function call, and the SavedModel has "
                                      "no TensorFlow 1 checkpoint of it")
                key = node.attr["shared_name"].s.decode() or name
                graph_variables[name] = node.op
                node.CopyFrom(_const(name, self.graph_value(key)))
        for node in kept.values():
            _read_frozen(node, graph_variables)
        out = tf.GraphDef(versions=self.graph_def.versions)
        out.node.extend(kept[n.name] for n in self.graph_def.node if n.name in kept)
        library = {**self.functions, **{f.signature.name: f for f in self.new_functions}}
        out.library.function.extend(library[name] for name in self._reached_functions(out.node, library))
        return out

    def _bind_captures(self, node: tf.NodeDef, nodes: Mapping[str, tf.NodeDef]) -> dict[str, int]:
        """Specializes a call of the MetaGraphDef's graph for the variables among its captures; returns
        {VarHandleOp: variable} of those."""
        function = node.attr["f"].func.name
        captures = self.bound_inputs.get(function, ())
        data = [i for i in node.input if not i.startswith("^")]
        if len(captures) > len(data):
            raise FreezeError(f"call {node.name!r} of {function!r} has {len(data)} inputs but the object graph "
                              f"binds {len(captures)} captures")
        first = len(data) - len(captures)
        bound = {first + k: variable for k, variable in enumerate(captures)
                 if nodes.get(_node_name(data[first + k]), tf.NodeDef()).op == "VarHandleOp"}
        if bound:
            node.attr["f"].func.name = self._specialize(function, bound)
            _retype_inputs(node, {k: self._dtype(v) for k, v in bound.items()})
        return {_node_name(data[k]): variable for k, variable in bound.items()}

    def _dtype(self, variable: int) -> int:
        return dtypes.from_numpy(self.value(variable).dtype)

    def _specialize(self, name: str, bound: Mapping[int, int]) -> str:
        """The name of function `name` with its resource arguments at `bound` positions taking the values of
        those variables instead."""
        key = (name, tuple(sorted(bound.items())))
        if key in self.specialized:
            return self.specialized[key]
        if name not in self.functions:
            raise FreezeError(f"the graph's library has no function {name!r}")
        function = tf.FunctionDef()
        function.CopyFrom(self.functions[name])
        function.signature.name = self.specialized[key] = f"{name}_frozen_{len(self.specialized)}"
        args = function.signature.input_arg
        aliases = {args[k].name: variable for k, variable in bound.items()}  # reference -> variable
        renamed: dict[str, str] = {}  # "read:value:" -> "read:output:" of ReadVariableOps made Identities
        axes = []  # the axis of each ResourceGather made a GatherV2
        for node in function.node_def:
            refs = [i for i in node.input if not i.startswith("^") and i in aliases]
            if not refs:
                continue
            if node.op in ("ReadVariableOp", "Identity"):
                dtype = self._dtype(aliases[node.input[0]])
                if node.op == "ReadVariableOp":
                    if node.attr["dtype"].type != dtype:
                        raise FreezeError(f"{node.name!r} in function {name!r} reads variable {refs[0]!r} as "
                                          f"{dtypes.dtype_name(node.attr['dtype'].type)}; its value is "
                                          f"{dtypes.dtype_name(dtype)}")
                    renamed[f"{node.name}:value:"] = f"{node.name}:output:"
                else:
                    aliases[f"{node.name}:output:0"] = aliases[node.input[0]]
                node.op = "Identity"
                node.attr.pop("dtype", None)
                node.attr["T"].type = dtype
            elif node.op == "ResourceGather" and refs == [node.input[0]]:  # an embedding lookup
                axes.append(_const(f"{node.name}/axis", np.array(0, np.int32)))
                node.input.insert(2, f"{axes[-1].name}:output:0")
                node.op = "GatherV2"
                node.attr["Tparams"].type = node.attr["dtype"].type
                del node.attr["dtype"]
                node.attr["Taxis"].type = tf.DT_INT32
                node.attr.pop("validate_indices", None)
            elif node.op in CALL_OPS:
                data = [i for i in node.input if not i.startswith("^")]
                inner = {k: aliases[ref] for k, ref in enumerate(data) if ref in aliases}
                node.attr["f"].func.name = self._specialize(node.attr["f"].func.name, inner)
                _retype_inputs(node, {k: self._dtype(v) for k, v in inner.items()})
            else:
                raise FreezeError(f"variable {refs[0]!r} is used by {node.op} node {node.name!r} in function "
                                  f"{name!r}; xlacs freezes variables that are only read (ReadVariableOp, "
                                  "ResourceGather)")
        function.node_def.extend(axes)
        for node in function.node_def:
            inputs = [_rename(i, renamed) for i in node.input]
            del node.input[:]
            node.input.extend(inputs)
        for out, ref in list(function.ret.items()):
            if ref in aliases:
                raise FreezeError(f"function {name!r} returns variable {ref!r}")
            function.ret[out] = _rename(ref, renamed)
        for k, variable in bound.items():
            args[k].type = self._dtype(variable)
            function.resource_arg_unique_id.pop(k, None)
        self.new_functions.append(function)
        return function.signature.name

    def _reached_functions(self, nodes: Sequence[tf.NodeDef], library: Mapping[str, tf.FunctionDef]) -> list[str]:
        """The library functions `nodes` call, directly or through the functions they call, in library order."""
        reached: set[str] = set()
        pending = list(nodes)
        while pending:
            node = pending.pop()
            for name in [node.op] + _function_attrs(node):
                if name in library and name not in reached:
                    reached.add(name)
                    pending.extend(library[name].node_def)
        return [name for name in library if name in reached]


def _read_frozen(node: tf.NodeDef, graph_variables: Mapping[str, str]) -> None:
    """A TensorFlow 1 graph's read of a variable frozen to a Const becomes an Identity of it; any other use of a
    resource variable (an assignment) is refused."""
    refs = [i for i in node.input if graph_variables.get(_node_name(i)) == "VarHandleOp"]
    if not refs:
        return
    if node.op != "ReadVariableOp":
        raise FreezeError(f"variable {_node_name(refs[0])!r} is used by {node.op} node {node.name!r}; xlacs "
                          "freezes variables that are only read (ReadVariableOp)")
    node.op = "Identity"
    node.attr["T"].type = node.attr.pop("dtype").type


def _rename(ref: str, renamed: Mapping[str, str]) -> str:
    for old, new in renamed.items():
        if ref.startswith(old):
            return new + ref[len(old):]
    return ref


def _function_attrs(node: tf.NodeDef) -> list[str]:
    names = []
    for value in node.attr.values():
        if value.HasField("func"):
            names.append(value.func.name)
        elif value.HasField("list"):
            names.extend(f.name for f in value.list.func)
    return names
