"""FunctionalizeCond: TF1 conditionals (Switch or _SwitchN into Merge) become If and Case nodes whose
branches are library functions.

Every node gets a branch state: the (predicate, branch) pairs, outermost first, under which it runs,
i.e. the deadness TF1's executor tracks. A Switch output appends a pair, a Merge removes its last one,
any other node runs under the most nested state of its inputs (data and control). Switches and Merges
sharing a predicate and an outer state form one conditional; the innermost is rewritten first, until
none is left. The graph must be free of loops (FunctionalizeWhile runs first).
"""
from __future__ import annotations

import posixpath

import numpy as np

from xlacs_server.errors import InvalidGraph
from xlacs_server.graph import op_outputs
from xlacs_server.graph.ir import Endpoint, Graph, Node
from xlacs_server.graph.op_defs import new_node
from xlacs_server.passes.extract import Library, closure, cut, splice, unique_name

SWITCH_OPS = ("Switch", "_SwitchN")
State = tuple  # of (predicate Endpoint, branch index) pairs, outermost first


def functionalize_conds(graph: Graph, library: Library) -> Graph:
    while any(n.op in SWITCH_OPS or n.op == "Merge" for n in graph.nodes.values()):
        states, merged = branch_states(graph)
        keys = [(switch_predicate(graph.nodes, n), states[n.name])
                for n in graph.nodes.values() if n.op in SWITCH_OPS]
        graph = _rewrite(graph, max(keys, key=lambda k: len(k[1])), states, merged, library)  # innermost
    return graph


def switch_predicate(nodes: dict[str, Node], switch: Node) -> Endpoint:
    """The switch's predicate, seen through Identity nodes: TF1's tf.cond switches its inputs on an
    Identity of the predicate and its pivots on the predicate itself; both belong to one conditional."""
    e = switch.inputs[1]
    while nodes[e.node].op in ("Identity", "Snapshot") and nodes[e.node].inputs:
        e = nodes[e.node].inputs[0]
    return e


def branch_states(graph: Graph) -> tuple[dict[str, State], dict[str, tuple]]:
    """Each node's branch state, and for each Merge the conditional (predicate, outer state) it ends."""
    nodes = graph.nodes
    states: dict[str, State] = {}
    merged: dict[str, tuple] = {}

    def edge(e: Endpoint) -> State:
        source = nodes[e.node]
        return states[e.node] + ((switch_predicate(nodes, source), e.index),) if source.op in SWITCH_OPS \
            else states[e.node]

    for node in graph.topological_order():
        incoming = [edge(e) for e in node.inputs]
        if node.op == "Merge":
            states[node.name], merged[node.name] = _merge_state(node, incoming)
            continue
        incoming += [states[c] for c in node.control_inputs]
        deepest = max(incoming, key=len, default=())
        for state in incoming:
            if deepest[:len(state)] != state:
                raise InvalidGraph(f"cannot functionalize node {node.name!r} ({node.op}): it reads values of "
                                   f"different conditional branches ({_describe(state)} and {_describe(deepest)})")
        states[node.name] = deepest
    return states, merged


def _merge_state(node: Node, incoming: list[State]) -> tuple[State, tuple]:
    if incoming and all(incoming):
        outer, predicate = incoming[0][:-1], incoming[0][-1][0]
        branches = {s[-1][1] for s in incoming}
        if all(s[:-1] == outer and s[-1][0] == predicate for s in incoming) and len(branches) == len(incoming):
            return outer, (predicate, outer)
    raise InvalidGraph(f"cannot functionalize Merge {node.name!r}: its inputs are not the branches of one "
                       f"conditional (they run under {', '.join(_describe(s) for s in incoming)})")


def _describe(state: State) -> str:
    return " / ".join(f"branch {k} of {p}" for p, k in state) or "no conditional"


def _rewrite(graph: Graph, key: tuple, states, merged, library: Library) -> Graph:
    """Replaces the conditional `key` by one If or Case node."""
    nodes = graph.nodes
    predicate, outer = key
    depth = len(outer)
    switches = [n for n in nodes.values()
                if n.op in SWITCH_OPS and (switch_predicate(nodes, n), states[n.name]) == key]
    merges = [n for n in nodes.values() if merged.get(n.name) == key]
    counts = {2 if n.op == "Switch" else n.attrs["num_outs"] for n in switches}
    if len(counts) != 1 or len({n.op for n in switches}) != 1:
        raise InvalidGraph(f"cannot functionalize the conditional on {predicate}: its switches "
                           f"{sorted(n.name for n in switches)} disagree on the number of branches")
    count = counts.pop()
    switch_names = {n.name for n in switches}

    def branch_of(name: str) -> int | None:
        state = states[name]
        return state[depth][1] if len(state) > depth and state[:depth] == outer and state[depth][0] == predicate \
            else None

    rets = [[None] * len(merges) for _ in range(count)]
    for j, merge in enumerate(merges):
        for e in merge.inputs:
            rets[states[e.node][depth][1] if e.node not in switch_names else e.index][j] = e
        for k in range(count):
            if rets[k][j] is None:
                raise InvalidGraph(f"cannot functionalize Merge {merge.name!r}: it has no input from branch {k} "
                                   f"of the conditional on {predicate}")

    members = [closure(nodes, [e.node for e in rets[k]], lambda n, k=k: branch_of(n) != k) for k in range(count)]
    outer_inputs: dict[Endpoint, int] = {}  # the If's inputs after the predicate -> argument index
    arg_dtypes = []

    def argument(e: Endpoint, dtype) -> int:
        if e not in outer_inputs:
            outer_inputs[e] = len(arg_dtypes)
            arg_dtypes.append(dtype)
        return outer_inputs[e]

    branch_args = []
    for k in range(count):
        args = {}
        for e in [e for name, node in nodes.items() if name in members[k] for e in node.inputs] + rets[k]:
            if e.node in switch_names:
                args[e] = argument(nodes[e.node].inputs[0], nodes[e.node].attrs["T"])
            elif e.node not in members[k]:
                args[e] = argument(e, _captured_dtype(nodes, e))  # a value from outside, read directly
        branch_args.append(args)

    is_if = switches[0].op == "Switch"
    name = unique_name(nodes, posixpath.join(posixpath.dirname(switches[0].name), "If" if is_if else "Case"))
    out_dtypes = [m.attrs["T"] for m in merges]
    refs = [library.add(f"{name}_{'else' if is_if and k == 0 else 'then' if is_if else f'branch{k}'}",
                        cut(nodes, members[k], branch_args[k], arg_dtypes, rets[k], f"branch {k} of {name!r}"),
                        out_dtypes) for k in range(count)]
    removed = switch_names | {m.name for m in merges} | {n for n in nodes if branch_of(n) is not None}
    inside = set().union(*members)
    control = [c for n in [*switches, *(node for name, node in nodes.items() if name in inside)]
               for c in n.control_inputs if c not in removed]
    attrs = {"Tin": arg_dtypes, "Tout": out_dtypes}
    if is_if:
        attrs.update(Tcond=np.dtype(np.bool_), then_branch=refs[1], else_branch=refs[0])
    else:
        attrs.update(branches=refs)
    replacement = new_node(name, "If" if is_if else "Case", [predicate, *outer_inputs],
                           list(dict.fromkeys(control)), attrs, switches[0].device)
    outputs = {m.name: j for j, m in enumerate(merges)}
    return splice(graph, removed, replacement, outputs)


def _captured_dtype(nodes: dict[str, Node], e: Endpoint):
    dtype = op_outputs.output_dtype(nodes[e.node], e.index)
    if dtype is None:
        raise InvalidGraph(f"cannot functionalize a conditional reading {e}: the dtype of "
                           f"{nodes[e.node].op} outputs is not known")
    return dtype
