"""NodeDef attrs checked against TensorFlow's OpDefs, as TF's ValidateNodeDef does: each attr has the kind its
op declares (a string where an int belongs is an InvalidGraph at import, never a crash in a pass or a
lowering), and the attrs without a default are set. The OpDefs come from a table generated from TensorFlow
(op_attrs_table.py), so the daemon never imports TensorFlow."""
from __future__ import annotations

import functools

from xlacs.v1 import tf_graph_pb2 as tf
from xlacs_server.errors import InvalidGraph
from xlacs_server.graph.op_attrs_table import ATTRS

# OpDef attr kinds -> the AttrValue field that holds them (in `list` for list kinds).
FIELDS = {"string": "s", "int": "i", "float": "f", "bool": "b", "type": "type", "shape": "shape",
          "tensor": "tensor", "func": "func"}
LIST_FIELDS = tuple(FIELDS.values())


@functools.lru_cache(maxsize=None)
def op_attrs(op: str) -> dict[str, tuple[str, bool]] | None:
    """Attr name -> (kind, required) for a TF op, or None when TensorFlow does not know the op."""
    spec = ATTRS.get(op)
    if spec is None:
        return None
    attrs = {}
    for item in spec.split():
        name, _, kind = item.partition(":")
        attrs[name] = (kind.rstrip("!"), kind.endswith("!"))
    return attrs


def check_node_def(nd: tf.NodeDef) -> None:
    declared = op_attrs(nd.op)
    if declared is None:  # a function called as an op, or an op TF does not register: the lowering decides
        return
    for name, value in nd.attr.items():
        if name in declared and not _has_kind(value, declared[name][0]):
            raise InvalidGraph(f"node {nd.name!r} ({nd.op}): attr {name!r} holds {_kind_of(value)}, but "
                               f"{nd.op} declares it {declared[name][0]}")
    missing = sorted(name for name, (_, required) in declared.items() if required and name not in nd.attr)
    if missing:
        raise InvalidGraph(f"node {nd.name!r} ({nd.op}): attr(s) {missing} are missing; {nd.op} requires them")


def _has_kind(value: tf.AttrValue, kind: str) -> bool:
    held = value.WhichOneof("value")
    if held == "placeholder":  # a function body's `$attr`, bound when the function is instantiated
        return True
    if not kind.startswith("list("):
        return held == FIELDS[kind]
    return held == "list" and all(not len(getattr(value.list, f)) or f == FIELDS[kind[5:-1]] for f in LIST_FIELDS)


def _kind_of(value: tf.AttrValue) -> str:
    held = value.WhichOneof("value")
    if held is None:
        return "no value"
    names = {field: kind for kind, field in FIELDS.items()}
    if held == "list":
        fields = [f for f in LIST_FIELDS if len(getattr(value.list, f))]
        return f"a list({', '.join(names[f] for f in fields)})" if fields else "an empty list"
    return f"{'an' if names[held][0] in 'aeiou' else 'a'} {names[held]}"
