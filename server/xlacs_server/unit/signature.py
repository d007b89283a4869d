"""The request's signature on the graph: its feeds and fetches must name real tensors, and a feed must fit the
tensor it replaces, as TF's feeds must."""
from __future__ import annotations

import numpy as np

from xlacs import dtypes
from xlacs_server.errors import InvalidRequest
from xlacs_server.graph.ir import Endpoint, Graph, Node
from xlacs_server.graph.op_outputs import output_dtype
from xlacs_server.lower import limits
from xlacs_server.unit.variables import is_variable

Feed = tuple[str, int, tuple[int, ...]]  # (name, TF DataType, shape), as a CompileRequest gives it


def with_signature(graph: Graph, feeds: list[Feed], fetches: list[str]) -> Graph:
    """The graph with the request's feeds and fetches, after checking that they name real tensors."""
    fed = [Endpoint.parse(name) for name, _, _ in feeds]
    fetched = [Endpoint.parse(name) for name in fetches]
    if not fetched:
        raise InvalidRequest("the request has no fetches: name at least one node:index to compute")
    duplicates = sorted({str(e) for e in fed if fed.count(e) > 1})
    if duplicates:
        raise InvalidRequest(f"feed(s) {duplicates} are given more than once")
    for kind, endpoints in (("feed", fed), ("fetch", fetched)):
        for e in endpoints:
            if e.node not in graph.nodes:
                raise InvalidRequest(f"{kind} {str(e)!r} names node {e.node!r}, which is not in the graph")
    for e, (name, dtype, shape) in zip(fed, feeds):
        if any(d < 0 for d in shape):
            raise InvalidRequest(f"feed {name!r} has shape {list(shape)}: a dimension is a size >= 0, or -1 "
                                 f"for one known only at Execute")
        limits.check_shape(f"feed {name!r}", shape)
        node = graph.nodes[e.node]
        if not is_variable(node):
            check_feed(node, e.index, name, dtypes.to_numpy(dtype), shape)
    return graph.replace(feeds=fed, fetches=fetched,
                         feed_specs=[(dtypes.to_numpy(dtype), tuple(shape)) for _, dtype, shape in feeds])


def check_feed(node: Node, index: int, name: str, dtype: np.dtype, shape: tuple[int, ...]) -> None:
    """As TF feeds: a feed has the dtype of the tensor it replaces, and a shape that tensor's static shape
    admits (a placeholder's shape attr, a constant's value)."""
    try:
        declared = output_dtype(node, index)
    except ValueError as e:
        raise InvalidRequest(f"feed {name!r}: {e}") from None
    if isinstance(declared, np.dtype) and declared != dtype:
        raise InvalidRequest(f"feed {name!r} is declared {dtype} but {node.op.lower()} {node.name!r} has dtype "
                             f"{declared}")
    static = node.attrs["shape"] if node.op in ("Placeholder", "PlaceholderWithDefault") else \
        np.shape(node.attrs["value"]) if node.op == "Const" else None
    if static is not None and (len(static) != len(shape) or any(d >= 0 and d != s for d, s in zip(static, shape))):
        raise InvalidRequest(f"feed {name!r} has shape {list(shape)} but {node.op.lower()} {node.name!r} has shape "
                             f"{list(static)}")
