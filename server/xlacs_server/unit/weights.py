"""Weight lifting: weights leave the XLA program and become parameters bound at Execute.

A Const is a weight when it is a floating-point tensor of at least `min_float_elements` elements (kernels,
biases, batch-norm vectors) or any tensor of at least `threshold_bytes` (embedding and lookup tables).

The program then depends on the weights' shapes and dtypes only, so compile time and executable size stop
growing with the weights, and a fine-tuned checkpoint of a cached architecture is a cache hit.
Parameters are ordered canonically (a breadth-first walk from the fetches through input slots), so that
graphs that differ only in node names or order get the same program and bind their weights alike.
"""
from collections import deque

from xlacs_server.graph.ir import Endpoint, Graph
from xlacs_server.graph.tensor_proto import is_splat
from xlacs_server.lower import registry
from xlacs_server.lower.dtypes import FLOAT


def canonical_order(graph: Graph) -> list[str]:
    """Node names reached from the fetches, breadth first, inputs in slot order."""
    seen, order = set(), []
    queue = deque(e.node for e in graph.fetches)
    while queue:
        name = queue.popleft()
        if name in seen:
            continue
        seen.add(name)
        order.append(name)
        node = graph.nodes[name]
        queue.extend(e.node for e in node.inputs)
        queue.extend(node.control_inputs)
    return order


def _needed_as_constants(graph: Graph) -> set[str]:
    """Nodes that some reader takes as a compile-time-constant input; they must stay in the program."""
    needed = set()
    for node in graph.nodes.values():
        lowering = registry.lookup(node.op, graph.platform)
        for spec in lowering.constant_inputs if lowering else ():
            index, _ = lowering.constant_input_index(spec, len(node.inputs))
            if index < len(node.inputs):
                needed.add(node.inputs[index].node)
    return needed


def lift_weights(graph: Graph, threshold_bytes: int, min_float_elements: int) -> Graph:
    """The graph with its weights turned into parameters (threshold_bytes <= 0 disables lifting)."""
    if threshold_bytes <= 0:
        return graph
    fed = {e.node for e in graph.feeds}
    keep = _needed_as_constants(graph) | fed
    params = []
    for name in canonical_order(graph):
        node = graph.nodes[name]
        value = node.attrs.get("value")
        if node.op != "Const" or name in keep or value.dtype == object or is_splat(value):
            continue  # a splat stays in the program: XLA broadcasts its one value
        if value.nbytes >= threshold_bytes or (value.dtype in FLOAT and value.size >= min_float_elements):
            params.append(Endpoint(name, 0))
    return graph.replace(params=params)


def weight_values(graph: Graph) -> list:
    return [graph.nodes[e.node].attrs["value"] for e in graph.params]
