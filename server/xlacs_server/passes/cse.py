"""Common-subexpression elimination: nodes with the same op, attrs, inputs and control inputs merge."""
import dataclasses

from xlacs_server.graph.fingerprint import attr_digest
from xlacs_server.graph.ir import Endpoint, Graph
from xlacs_server.lower import registry
from xlacs_server.passes.registry import Grouping, register_pass


@register_pass(Grouping.OPTIMIZATION, phase=30)
def cse(graph: Graph) -> Graph:
    keep = {e.node for e in [*graph.feeds, *graph.params, *graph.fetches]}
    replaced: dict[str, str] = {}  # duplicate -> the node that stands for it
    seen: dict[tuple, str] = {}
    nodes = {}
    for node in graph.topological_order():
        inputs = [Endpoint(replaced.get(e.node, e.node), e.index) for e in node.inputs]
        control = sorted({replaced.get(c, c) for c in node.control_inputs})
        node = dataclasses.replace(node, inputs=inputs, control_inputs=control)
        lowering = registry.lookup(node.op, graph.platform)
        if node.name not in keep and lowering is not None and lowering.foldable:
            key = (node.op, tuple(inputs), tuple(control),
                   tuple((k, attr_digest(v)) for k, v in sorted(node.attrs.items()) if not k.startswith("_")))
            if key in seen:
                replaced[node.name] = seen[key]
                continue
            seen[key] = node.name
        nodes[node.name] = node
    return graph.replace(nodes={n: nodes[n] for n in graph.nodes if n in nodes})
