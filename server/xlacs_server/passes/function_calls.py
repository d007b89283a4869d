"""Nodes whose op is a library function (how TF1's Defun calls one) become the PartitionedCall nodes
they stand for, so that functionalization, inlining, checks and lowering see one kind of call. In
function bodies, function_def.to_graph does the same."""
from xlacs_server.graph.function_def import call_node
from xlacs_server.graph.ir import Graph
from xlacs_server.passes.registry import Grouping, register_pass


@register_pass(Grouping.POST_IMPORT, phase=5)
def function_call_nodes(graph: Graph) -> Graph:
    if not any(node.op in graph.library for node in graph.nodes.values()):
        return graph
    return graph.replace(nodes={name: call_node(node, graph.library[node.op]) if node.op in graph.library else node
                                for name, node in graph.nodes.items()})
