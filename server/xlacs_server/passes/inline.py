"""Inline function calls (PartitionedCall, StatefulPartitionedCall) into the graph, so that identity
removal, constant folding and CSE see across call boundaries; XLA would inline them anyway."""
from __future__ import annotations

import dataclasses

from xlacs_server.config import Settings
from xlacs_server.graph.function_def import ARG_OP, to_graph
from xlacs_server.graph.ir import Endpoint, Graph, Node
from xlacs_server.passes.registry import Grouping, register_pass

CALL_OPS = {"PartitionedCall", "StatefulPartitionedCall"}
MAX_ROUNDS = 16  # calls inside inlined bodies are inlined too, this many levels deep


def _inline_call(graph: Graph, call: Node, nodes: dict[str, Node]) -> dict[Endpoint, Endpoint]:
    """Adds the body of `call` to `nodes` (names prefixed with the call's); returns the call's outputs
    mapped to the endpoints that now compute them."""
    ref = call.attrs["f"]
    body = to_graph(graph.library[ref.name], ref.attrs, Settings.max_tensor_elements, graph.library)
    prefix = f"{call.name}/"
    args = {e.node: call.inputs[i] for i, e in enumerate(body.feeds)}

    def outside(e: Endpoint) -> Endpoint:
        return args[e.node] if e.node in args else Endpoint(prefix + e.node, e.index)

    for node in body.nodes.values():
        if node.op == ARG_OP:
            continue
        control = [prefix + c for c in node.control_inputs if c not in args]
        if not node.inputs and not control:  # an entry node runs after the call's control inputs
            control = list(call.control_inputs)
        nodes[prefix + node.name] = dataclasses.replace(
            node, name=prefix + node.name, inputs=[outside(e) for e in node.inputs], control_inputs=control)
    return {Endpoint(call.name, i): outside(e) for i, e in enumerate(body.fetches)}


def _inline_round(graph: Graph) -> Graph | None:
    pinned = {e.node for e in [*graph.feeds, *graph.fetches]}
    calls = [n for n in graph.nodes.values()
             if n.op in CALL_OPS and n.name not in pinned and n.attrs.get("f") and n.attrs["f"].name in graph.library]
    if not calls:
        return None
    inlined = {c.name for c in calls}
    nodes = {name: node for name, node in graph.nodes.items() if name not in inlined}
    outputs: dict[Endpoint, Endpoint] = {}
    control_outputs: dict[str, list[str]] = {}
    for call in calls:
        mapped = _inline_call(graph, call, nodes)
        outputs.update(mapped)
        control_outputs[call.name] = sorted({e.node for e in mapped.values()})
    for name, node in list(nodes.items()):
        nodes[name] = dataclasses.replace(
            node, inputs=[outputs.get(e, e) for e in node.inputs],
            control_inputs=list(dict.fromkeys(c2 for c in node.control_inputs for c2 in control_outputs.get(c, [c]))))
    return graph.replace(nodes=nodes)


@register_pass(Grouping.POST_IMPORT, phase=20)
def inline_calls(graph: Graph) -> Graph:
    """Inlines every call whose node is neither fed nor fetched (those keep their names)."""
    for _ in range(MAX_ROUNDS):
        inlined = _inline_round(graph)
        if inlined is None:
            break
        graph = inlined
    return graph
