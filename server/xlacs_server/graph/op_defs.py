"""TensorFlow's OpDefs, and NodeDefs checked against them as TF's ValidateNodeDef does: each attr has the kind
its op declares and at least its minimum, the attrs without a default are set, and the node has as many inputs
as its op takes. A string where an int belongs, or a missing input, is an InvalidGraph at import rather than a
crash in a pass or a lowering. The import sets the attrs a node leaves at their OpDef's default, as TF's
AddDefaultAttrsToGraphDef does, and a pass builds its nodes with new_node: past the import every node holds
every attr of its OpDef, so a pass or a rule reads `node.attrs["epsilon"]` and restates no default. The OpDefs
are TF's own OpList (data/op_list.pb, made from TensorFlow by scripts/gen_op_defs.py), parsed once on first use,
so the daemon never imports TensorFlow."""
from __future__ import annotations

import functools
from importlib import resources
from typing import NamedTuple

from xlacs.v1 import tf_graph_pb2 as tf
from xlacs_server.config import Settings
from xlacs_server.errors import InvalidGraph
from xlacs_server.graph import attrs
from xlacs_server.graph.ir import Endpoint, Node

# OpDef attr kinds -> the AttrValue field that holds them (in `list` for list kinds).
FIELDS = {"string": "s", "int": "i", "float": "f", "bool": "b", "type": "type", "shape": "shape",
          "tensor": "tensor", "func": "func"}
KINDS = {field: kind for kind, field in FIELDS.items()}


@functools.cache
def _op_defs() -> dict[str, tf.OpDef]:
    data = resources.files(__package__).joinpath("data/op_list.pb").read_bytes()
    return {definition.name: definition for definition in tf.OpList.FromString(data).op}


def op_def(op: str) -> tf.OpDef | None:
    """TF's OpDef of `op`; None for an op TF does not register (a function called as an op, a custom op)."""
    return _op_defs().get(op)


class AttrDef(NamedTuple):
    kind: str  # as OpDef spells it: `int`, `list(type)`, ...
    minimum: int | None  # the least value of an int, or length of a list
    default: tf.AttrValue | None  # None: the attr has no default, a node must set it

    @property
    def required(self) -> bool:
        return self.default is None


@functools.lru_cache(maxsize=None)
def attr_defs(op: str) -> dict[str, AttrDef] | None:
    """Attr name -> its definition, for an op TF registers; None for any other op."""
    definition = op_def(op)
    if definition is None:
        return None
    return {a.name: AttrDef(a.type, a.minimum if a.has_minimum else None,
                            a.default_value if a.HasField("default_value") else None) for a in definition.attr}


def default_attrs(op: str) -> dict[str, object]:
    """The attrs that TF's OpDef of `op` gives a default, decoded as the importer decodes a node's attrs. Decoded
    on each call, so that no two nodes share a mutable value (a list)."""
    return {name: attrs.decode(d.default, Settings.max_tensor_elements)
            for name, d in (attr_defs(op) or {}).items() if d.default is not None}


def add_default_attrs(graph_def: tf.GraphDef) -> None:
    """Sets each attr that a node leaves out and its op's OpDef defaults to that default, in the graph's nodes and
    in the bodies of its library's functions, as TF's AddDefaultAttrsToGraphDef does when it imports a graph. A
    node whose op TF does not register (a call of a library function) keeps its attrs."""
    for nd in [*graph_def.node, *(nd for function in graph_def.library.function for nd in function.node_def)]:
        for name, declared in (attr_defs(nd.op) or {}).items():
            if declared.default is not None and name not in nd.attr:
                nd.attr[name].CopyFrom(declared.default)


def new_node(name: str, op: str, inputs: list[Endpoint], control_inputs: list[str], given: dict,
             device: str = "") -> Node:
    """A node that a pass writes, holding, as an imported node does, every attr of its OpDef: `given` and the
    defaults of those it leaves out."""
    return Node(name, op, inputs, control_inputs, {**default_attrs(op), **given}, device)


def check_node_def(nd: tf.NodeDef) -> None:
    declared = attr_defs(nd.op)
    if declared is None:  # a function called as an op, or an op TF does not register: the lowering decides
        return
    for name, value in nd.attr.items():
        if name in declared:
            _check_attr(nd, name, value, declared[name])
    missing = sorted(name for name, d in declared.items() if d.required and name not in nd.attr)
    if missing:
        raise InvalidGraph(f"node {nd.name!r} ({nd.op}): attr(s) {missing} are missing; {nd.op} requires them")
    expected = _input_count(nd)
    given = sum(1 for i in nd.input if not i.startswith("^"))
    if expected is not None and given != expected:
        raise InvalidGraph(f"node {nd.name!r} ({nd.op}) has {given} input(s); {nd.op} takes {expected} here "
                           f"({' '.join(_arg_spec(a) for a in op_def(nd.op).input_arg) or 'none'})")


def _check_attr(nd: tf.NodeDef, name: str, value: tf.AttrValue, declared: AttrDef) -> None:
    held = value.WhichOneof("value")
    if held == "placeholder":  # a function body's `$attr`, bound when the function is instantiated
        return
    listed = declared.kind.startswith("list(")
    field = FIELDS[declared.kind[5:-1] if listed else declared.kind]
    if listed:
        matches = held == "list" and all(f == field or not len(getattr(value.list, f)) for f in KINDS)
    else:
        matches = held == field
    if not matches:
        raise InvalidGraph(f"node {nd.name!r} ({nd.op}): attr {name!r} holds {_kind_of(value)}, but {nd.op} "
                           f"declares it {declared.kind}")
    size = len(getattr(value.list, field)) if listed else value.i if declared.kind == "int" else None
    if declared.minimum is not None and size is not None and size < declared.minimum:
        what = "has length" if listed else "is"
        raise InvalidGraph(f"node {nd.name!r} ({nd.op}): attr {name!r} {what} {size}, under {nd.op}'s minimum "
                           f"of {declared.minimum}")


def _input_count(nd: tf.NodeDef) -> int | None:
    """How many data inputs the node's op takes with its attrs; None when they do not say."""
    count = 0
    for arg in op_def(nd.op).input_arg:
        if not arg.number_attr and not arg.type_list_attr:
            count += 1
            continue
        value = nd.attr.get(arg.number_attr or arg.type_list_attr)
        if value is None or value.WhichOneof("value") not in ("i", "list"):  # unset, or a body's `$attr`
            return None
        count += value.i if arg.number_attr else len(value.list.type)
    return count


def _arg_spec(arg: tf.OpDef.ArgDef) -> str:
    """`name` (one tensor), `name*N` (N of them, N an int attr) or `name[T]` (one per type of list attr T)."""
    return arg.name + (f"*{arg.number_attr}" if arg.number_attr else f"[{arg.type_list_attr}]"
                       if arg.type_list_attr else "")


def _kind_of(value: tf.AttrValue) -> str:
    held = value.WhichOneof("value")
    if held is None:
        return "no value"
    if held == "list":
        kinds = [KINDS[f] for f in KINDS if len(getattr(value.list, f))]
        return f"a list({', '.join(kinds)})" if kinds else "an empty list"
    return f"{'an' if KINDS[held][0] in 'aeiou' else 'a'} {KINDS[held]}"
