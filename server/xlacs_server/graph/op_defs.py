"""NodeDefs checked against TensorFlow's OpDefs, as TF's ValidateNodeDef does: each attr has the kind its op
declares and at least its minimum, the attrs without a default are set, and the node has as many inputs as
its op takes. A string where an int belongs, or a missing input, is an InvalidGraph at import rather than a
crash in a pass or a lowering. The OpDefs come from a table generated from TensorFlow (op_defs_table.py),
so the daemon never imports TensorFlow."""
from __future__ import annotations

import functools
from typing import NamedTuple

from xlacs.v1 import tf_graph_pb2 as tf
from xlacs_server.errors import InvalidGraph
from xlacs_server.graph.op_defs_table import ATTRS, INPUTS

# OpDef attr kinds -> the AttrValue field that holds them (in `list` for list kinds).
FIELDS = {"string": "s", "int": "i", "float": "f", "bool": "b", "type": "type", "shape": "shape",
          "tensor": "tensor", "func": "func"}
KINDS = {field: kind for kind, field in FIELDS.items()}


class AttrDef(NamedTuple):
    kind: str
    minimum: int | None
    required: bool


@functools.lru_cache(maxsize=None)
def attr_defs(op: str) -> dict[str, AttrDef] | None:
    """Attr name -> its definition, for an op TF registers; None for any other op."""
    spec = ATTRS.get(op)
    if spec is None:
        return None
    defs = {}
    for item in spec.split():
        name, _, kind = item.partition(":")
        required = kind.endswith("!")
        kind, _, minimum = kind.rstrip("!").partition(">=")
        defs[name] = AttrDef(kind, int(minimum) if minimum else None, required)
    return defs


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
                           f"({INPUTS[nd.op] or 'none'})")


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
    for arg in INPUTS[nd.op].split():
        if "*" not in arg and "[" not in arg:
            count += 1
            continue
        value = nd.attr.get(arg.partition("*")[2] or arg[arg.index("[") + 1:-1])
        if value is None or value.WhichOneof("value") not in ("i", "list"):  # unset, or a body's `$attr`
            return None
        count += value.i if "*" in arg else len(value.list.type)
    return count


def _kind_of(value: tf.AttrValue) -> str:
    held = value.WhichOneof("value")
    if held is None:
        return "no value"
    if held == "list":
        kinds = [KINDS[f] for f in KINDS if len(getattr(value.list, f))]
        return f"a list({', '.join(kinds)})" if kinds else "an empty list"
    return f"{'an' if KINDS[held][0] in 'aeiou' else 'a'} {KINDS[held]}"
