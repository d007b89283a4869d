"""Weight lifting: weights leave the XLA program and become parameters bound at Execute.

A Const is a weight when it is a floating-point tensor of at least `min_float_elements` elements (kernels,
biases, batch-norm vectors) or any tensor of at least `threshold_bytes` (embedding and lookup tables).

The program then depends on the weights' shapes and dtypes only, so compile time and executable size stop
growing with the weights, and a fine-tuned checkpoint of a cached architecture is a cache hit.
Parameters are ordered canonically (a breadth-first walk from the fetches through input slots), so that
graphs that differ only in node names or order get the same program and bind their weights alike.

What the lifted weights alone compute (`weight_only`) can run once per weight set: compile/prepare.py splits it
off into a prepare program.
"""
from collections import deque

import numpy as np

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


# Their outputs depend on their inputs' shapes only, so they lower to constants (which a Reshape may need).
SHAPE_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank"})
# A weight-only tensor may exceed its inputs' total size by at most this much: a prepared weight the size of an
# activation (a broadcast, a tile) costs more to read on every call than the op costs to run.
MAX_GROWTH_BYTES = 64 << 10


def weight_only(graph: Graph) -> set[str]:
    """Nodes computed from the lifted weights alone, which can run once per weight set (compile/prepare.py):
    every input (data or control) is a lifted weight, a program constant or another such node, and at least one
    input depends on a lifted weight; the op is foldable (nothing stateful, random or control flow) and not one of
    SHAPE_OPS; its outputs are not much bigger than its inputs (by the shapes infer_shapes recorded)."""
    fed = {e.node for e in [*graph.feeds, *graph.variables]}
    lifted = {e.node for e in graph.params}
    constant: set[str] = set()  # program constants and what they alone compute
    found: set[str] = set()
    for node in graph.topological_order():
        sources = {e.node for e in node.inputs} | set(node.control_inputs)
        if node.op == "Const" and node.name not in lifted and node.name not in fed:
            constant.add(node.name)
            continue
        lowering = registry.lookup(node.op, graph.platform)
        # Each source looked up in the three sets: their union, made for every node, made the walk quadratic.
        if node.op == "Const" or node.name in fed or not sources or lowering is None or not lowering.foldable \
                or not all(s in constant or s in lifted or s in found for s in sources):
            continue
        if node.op in SHAPE_OPS or sources <= constant:
            constant.add(node.name)
        elif not _grows(graph, node):
            found.add(node.name)
    return found


def _grows(graph: Graph, node) -> bool:
    """Whether the node's outputs take MAX_GROWTH_BYTES more than its inputs; False when a size is unknown."""
    inputs = [_nbytes(graph, e) for e in node.inputs]
    outputs = [_nbytes(graph, Endpoint(node.name, i)) for i in range(len(node.attrs.get("_output_shapes", ())))]
    if not outputs or None in inputs or None in outputs:
        return False
    return sum(outputs) > sum(inputs) + MAX_GROWTH_BYTES


def _nbytes(graph: Graph, e: Endpoint) -> int | None:
    node = graph.nodes[e.node]
    if node.op == "Const":
        return node.attrs["value"].nbytes
    shapes, dtypes = node.attrs.get("_output_shapes"), node.attrs.get("_output_dtypes")
    if shapes is None or dtypes is None or e.index >= len(shapes):
        return None
    return int(np.prod(shapes[e.index], dtype=np.int64)) * np.dtype(dtypes[e.index]).itemsize
