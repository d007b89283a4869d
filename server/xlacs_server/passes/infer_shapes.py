"""Shape and dtype inference for every node, by abstract evaluation of the lowering rules, so that shape
errors surface before lowering and name their node. Results land in `_output_shapes` and
`_output_dtypes` attrs (visible in --dump-graphs)."""
import dataclasses

import jax

from xlacs_server.graph.attrs import Shape
from xlacs_server.graph.ir import Graph
from xlacs_server.lower.engine import Lowerer, argument_specs, bind_arguments
from xlacs_server.passes.registry import Grouping, register_pass


@register_pass(Grouping.PRE_LOWERING, phase=10)
def infer_shapes(graph: Graph) -> Graph:
    order = graph.topological_order()
    inferred: dict[str, dict[int, tuple]] = {}

    def evaluate(*args):
        env, _ = bind_arguments(graph, args)
        Lowerer(graph, graph.platform).run(order, env)
        for e, value in env.items():
            if hasattr(value, "shape") and hasattr(value, "dtype"):
                inferred.setdefault(e.node, {})[e.index] = (value.dtype, tuple(value.shape))
        return []

    jax.eval_shape(evaluate, *argument_specs(graph))
    nodes = {}
    for name, node in graph.nodes.items():
        outputs = inferred.get(name, {})
        if outputs and sorted(outputs) == list(range(len(outputs))):
            node = dataclasses.replace(node, attrs={
                **node.attrs, "_output_shapes": [Shape(outputs[i][1]) for i in range(len(outputs))],
                "_output_dtypes": [outputs[i][0] for i in range(len(outputs))]})
        nodes[name] = node
    return graph.replace(nodes=nodes)
