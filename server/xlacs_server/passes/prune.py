"""Prune to what the fetches need, stopping at the feeds; DCE drops what later passes orphaned."""
import dataclasses
from collections import deque

from xlacs_server.graph.ir import FuncRef, Graph
from xlacs_server.passes.registry import Grouping, register_pass


def _reachable(graph: Graph) -> set[str]:
    """Nodes that the fetches reach through data and control edges, not looking past fed nodes, and the
    lifted weights: they are program parameters, bound at Execute whether or not a reader is left."""
    return graph.reachable([*(e.node for e in graph.fetches), *(e.node for e in graph.params)],
                           stop={e.node for e in graph.feeds})


@register_pass(Grouping.POST_IMPORT, phase=0)
def prune(graph: Graph) -> Graph:
    """Keeps the nodes the fetches need; a fed node becomes a program input and keeps no inputs."""
    fed = {e.node for e in graph.feeds}
    keep = _reachable(graph)
    nodes = {name: dataclasses.replace(node, inputs=[], control_inputs=[]) if name in fed else node
             for name, node in graph.nodes.items() if name in keep}
    return graph.replace(nodes=nodes)


def _function_refs(values) -> set[str]:
    names = set()
    for value in values:
        if isinstance(value, FuncRef):
            names.add(value.name)
            names |= _function_refs(value.attrs.values())
        elif isinstance(value, list):
            names |= _function_refs(value)
    return names


def _proto_function_refs(function_def) -> set[str]:
    names = set()
    for node_def in function_def.node_def:
        names.add(node_def.op)  # a node whose op is a library function calls it
        for attr in node_def.attr.values():
            if attr.HasField("func"):
                names.add(attr.func.name)
            names.update(f.name for f in attr.list.func)
    return names


@register_pass(Grouping.OPTIMIZATION, phase=40)
def dce(graph: Graph) -> Graph:
    """Drops nodes no fetch reaches any more and library functions no remaining node calls."""
    keep = _reachable(graph)
    nodes = {name: node for name, node in graph.nodes.items() if name in keep}
    used, queue = set(), deque(_function_refs(v for n in nodes.values() for v in n.attrs.values()))
    while queue:
        name = queue.popleft()
        if name in used or name not in graph.library:
            continue
        used.add(name)
        queue.extend(_proto_function_refs(graph.library[name]))
    return graph.replace(nodes=nodes, library={n: f for n, f in graph.library.items() if n in used})
