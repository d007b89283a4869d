"""What a GraphDef may cost before the daemon works on it: its bytes, its nodes, how deep its library
functions nest, and what decoding it may allocate beyond the bytes it carries (values TensorFlow fills in,
list attrs). Each check runs before the work it bounds."""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

from xlacs.v1 import tf_graph_pb2 as tf
from xlacs_server.config import Settings
from xlacs_server.errors import InvalidGraph, LimitExceeded


class DecodeBudget:
    """What one request's tensors and attrs may allocate as they are decoded: the bytes of values a
    TensorProto does not carry but TF fills in (its last value repeated), and the items of a list attr."""

    def __init__(self, max_fill_bytes: int, max_attr_list_length: int):
        self.max_fill_bytes, self.max_attr_list_length = max_fill_bytes, max_attr_list_length
        self.filled = 0

    def fill(self, nbytes: int, what: str) -> None:
        if self.filled + nbytes > self.max_fill_bytes:
            raise LimitExceeded(f"{what} fills in {nbytes} bytes of repeated values (this request: "
                                f"{self.filled + nbytes})", "max_fill_bytes", self.max_fill_bytes)
        self.filled += nbytes

    def list_length(self, length: int, what: str) -> None:
        if length > self.max_attr_list_length:
            raise LimitExceeded(f"{what} has {length} items", "max_attr_list_length", self.max_attr_list_length)


_BUDGET: contextvars.ContextVar[DecodeBudget | None] = contextvars.ContextVar("decode_budget", default=None)


@contextlib.contextmanager
def decode_budget(settings: Settings) -> Iterator[None]:
    """Scopes one request's budget (the compile path does, per call: pipeline/request.py within_limits)."""
    token = _BUDGET.set(DecodeBudget(settings.max_fill_bytes, settings.max_attr_list_length))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def budget() -> DecodeBudget:
    """The request's budget; outside a request (tools, tests), a fresh one with the default limits."""
    return _BUDGET.get() or DecodeBudget(Settings.max_fill_bytes, Settings.max_attr_list_length)


def check_bytes(data: bytes, max_bytes: int) -> None:
    if len(data) > max_bytes:
        raise LimitExceeded(f"graph_def has {len(data)} bytes", "max_graph_bytes", max_bytes)


def check_nodes(graph_def: tf.GraphDef, max_nodes: int) -> None:
    count = len(graph_def.node) + sum(len(f.node_def) for f in graph_def.library.function)
    if count > max_nodes:
        raise LimitExceeded(f"the graph and its function library have {count} nodes", "max_graph_nodes",
                            max_nodes)


def check_function_depth(graph_def: tf.GraphDef, max_depth: int) -> None:
    """Raises when the functions that the graph calls nest deeper than `max_depth` (the graph's own nodes
    are depth 0, a function they call is depth 1), or call themselves. Iterative: a hostile chain of
    10^5 functions needs no Python recursion."""
    calls = {f.signature.name: called_functions(f.node_def) for f in graph_def.library.function}
    if not calls:  # a frozen graph has no library: its nodes' attrs need no walk (40-55 ms for InceptionV3's)
        return
    depth: dict[str, int] = {}  # the depth of the deepest chain starting at a function, itself included
    for root in sorted(called_functions(graph_def.node) & calls.keys()):
        path, on_path = [(root, iter(sorted(calls[root] & calls.keys())))], {root}
        while path:
            name, pending = path[-1]
            callee = next((c for c in pending if c not in depth), None)
            if callee is None:
                path.pop()
                on_path.discard(name)
                depth[name] = 1 + max((depth[c] for c in calls[name] & calls.keys()), default=0)
                if depth[name] > max_depth:
                    raise LimitExceeded(f"function {name!r} starts a chain of {depth[name]} nested library "
                                        "functions", "max_function_depth", max_depth)
            elif callee in on_path:
                raise InvalidGraph(f"library function {callee!r} calls itself (the call in {name!r} closes "
                                   "the cycle)")
            else:
                path.append((callee, iter(sorted(calls[callee] & calls.keys()))))
                on_path.add(callee)


def called_functions(node_defs) -> set[str]:
    """The names of the functions that NodeDefs call: through func attrs (If branches, While bodies,
    PartitionedCall's f, lists of branches) or as their op."""
    names = set()
    for nd in node_defs:
        names.add(nd.op)
        pending = list(nd.attr.values())
        while pending:
            value = pending.pop()
            funcs = [value.func] if value.HasField("func") else list(value.list.func)
            names.update(f.name for f in funcs)
            pending.extend(v for f in funcs for v in f.attr.values())
    return names
