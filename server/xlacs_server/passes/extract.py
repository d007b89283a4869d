"""Cutting subgraphs out of a graph into library functions: what FunctionalizeControlFlow builds its
While bodies and If branches with."""
from __future__ import annotations

import dataclasses
import re

from xlacs_server.errors import InvalidGraph
from xlacs_server.graph import function_def
from xlacs_server.graph.ir import Endpoint, FuncRef, Graph, Node
from xlacs_server.graph.op_defs import new_node


class Library:
    """The graph's function library, growing with the functions a pass generates."""

    def __init__(self, functions: dict):
        self.functions = dict(functions)

    def add(self, hint: str, body: Graph, output_dtypes: list) -> FuncRef:
        name = unique_name(self.functions, re.sub(r"[^A-Za-z0-9_]", "_", hint).strip("_") or "function")
        self.functions[name] = function_def.from_graph(name, body, output_dtypes)
        return FuncRef(name, {})


def unique_name(nodes: dict, base: str) -> str:
    name, suffix = base, 0
    while name in nodes:
        suffix += 1
        name = f"{base}_{suffix}"
    return name


def closure(nodes: dict[str, Node], starts, stop) -> set[str]:
    """The nodes that `starts` reach backwards through data and control edges, without entering (or
    passing) the nodes for which `stop(name)` holds."""
    seen: set[str] = set()
    pending = [s for s in starts if not stop(s)]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        node = nodes[name]
        pending.extend(s for s in [e.node for e in node.inputs] + node.control_inputs if not stop(s))
    return seen


def cut(nodes: dict[str, Node], members: set[str], args: dict[Endpoint, int], arg_dtypes: list,
        rets: list[Endpoint], where: str) -> Graph:
    """The members as a function body: a member's input found in `args` (outside endpoint -> argument
    index) reads that argument; control inputs from outside are dropped (the caller moves them onto
    the node that replaces the subgraph). `where` names the subgraph in errors."""
    arg_names, index = [], 0
    for _ in arg_dtypes:
        while f"arg{index}" in members:
            index += 1
        arg_names.append(f"arg{index}")
        index += 1

    def inside(e: Endpoint, reader: str) -> Endpoint:
        if e in args:
            return Endpoint(arg_names[args[e]], 0)
        if e.node in members:
            return e
        raise InvalidGraph(f"cannot functionalize {where}: {reader} reads {e}, which is neither computed "
                           "inside it nor one of its inputs")

    body: dict[str, Node] = {}
    for i, (name, dtype) in enumerate(zip(arg_names, arg_dtypes)):
        body[name] = new_node(name, function_def.ARG_OP, [], [], {"T": dtype, "index": i})
    for name, node in nodes.items():
        if name in members:
            body[name] = Node(name, node.op, [inside(e, f"node {name!r}") for e in node.inputs],
                              [c for c in node.control_inputs if c in members], node.attrs, node.device)
    return Graph(body, feeds=[Endpoint(n, 0) for n in arg_names],
                 fetches=[inside(e, "the result") for e in rets])


def splice(graph: Graph, removed: set[str], replacement: Node, outputs: dict[str, int]) -> Graph:
    """The graph with `removed` replaced by `replacement`: output 0 of a removed node named in `outputs`
    becomes that output of the replacement; control edges from removed nodes come from it."""
    def rewire(e: Endpoint, reader: str) -> Endpoint:
        if e.node in outputs and e.index == 0:
            return Endpoint(replacement.name, outputs[e.node])
        if e.node in removed:
            raise InvalidGraph(f"cannot functionalize {replacement.name!r}: {reader} reads {e}, which has no "
                               "value outside it")
        return e

    nodes = {}
    for name, node in graph.nodes.items():
        if name not in removed:
            control = [replacement.name if c in removed else c for c in node.control_inputs]
            nodes[name] = dataclasses.replace(node, inputs=[rewire(e, f"node {name!r}") for e in node.inputs],
                                              control_inputs=list(dict.fromkeys(control)))
    nodes[replacement.name] = replacement
    return graph.replace(nodes=nodes, fetches=[rewire(e, "a fetch") for e in graph.fetches])
