"""Prune the graph to what the fetches need, stopping at the feeds."""
import dataclasses
from collections import deque

from xlacs_server.graph.ir import Graph
from xlacs_server.passes.registry import Grouping, register_pass


@register_pass(Grouping.POST_IMPORT, phase=0)
def prune(graph: Graph) -> Graph:
    """Keeps the nodes that fetches reach through data and control edges; fed nodes' inputs are cut."""
    fed = {e.node for e in graph.feeds}
    keep = set()
    queue = deque(e.node for e in graph.fetches)
    while queue:
        name = queue.popleft()
        if name in keep:
            continue
        keep.add(name)
        if name in fed:
            continue
        node = graph.nodes[name]
        queue.extend(e.node for e in node.inputs)
        queue.extend(node.control_inputs)
    # A fed node is a program parameter: it keeps no inputs.
    nodes = {name: dataclasses.replace(node, inputs=[], control_inputs=[]) if name in fed else node
             for name, node in graph.nodes.items() if name in keep}
    return graph.replace(nodes=nodes)
