"""Constant folding on the host: a single-output node whose inputs are all constants becomes a Const,
unless its value would be much bigger than its inputs (folding must never balloon the graph)."""

import numpy as np

from xlacs_server.graph.ir import Endpoint, Graph, Node
from xlacs_server.graph.op_defs import new_node
from xlacs_server.lower import registry
from xlacs_server.lower.engine import Lowerer
from xlacs_server.passes.registry import Grouping, register_pass

# A folded value may exceed its inputs' total size by at most this much.
MAX_GROWTH_BYTES = 64 << 10
NOT_FOLDED = {"Const", "Placeholder", "PlaceholderWithDefault"}


def _const(node: Node, value: np.ndarray) -> Node:
    return new_node(node.name, "Const", [], node.control_inputs, {"value": value, "dtype": value.dtype}, node.device)


@register_pass(Grouping.OPTIMIZATION, phase=20)
def constant_fold(graph: Graph) -> Graph:
    lifted = {e.node for e in graph.params}
    fed = {e.node for e in graph.feeds}
    readers_of_output = {}
    for node in graph.nodes.values():
        for e in node.inputs:
            readers_of_output.setdefault(e.node, set()).add(e.index)
    for e in graph.fetches:
        readers_of_output.setdefault(e.node, set()).add(e.index)
    lowerer = Lowerer(graph, graph.platform)
    nodes = dict(graph.nodes)
    for node in graph.topological_order():
        lowering = registry.lookup(node.op, graph.platform)
        sources = [nodes[e.node] for e in node.inputs]
        if (node.op in NOT_FOLDED or node.name in fed or not node.inputs or lowering is None
                or not lowering.foldable or readers_of_output.get(node.name, {0}) != {0}
                or any(s.op != "Const" or s.name in lifted or e.index != 0 for s, e in zip(sources, node.inputs))):
            continue
        values = [s.attrs["value"] for s in sources]
        if any(v.dtype == object for v in values):
            continue
        env = {e: v for e, v in zip(node.inputs, values)}
        lowerer.run_node(node, env)
        value = env.get(Endpoint(node.name, 0))
        if isinstance(value, np.ndarray) and value.dtype != object and \
                value.nbytes <= sum(v.nbytes for v in values) + MAX_GROWTH_BYTES:
            nodes[node.name] = _const(node, value)
    return graph.replace(nodes=nodes)
