"""MarkForCompilation as a diagnostic: every node must have a lowering. When some do not, report each
connected region of unsupported nodes with the tensors that flow into and out of it."""
from xlacs_server.errors import UnsupportedOps
from xlacs_server.graph.ir import Graph
from xlacs_server.lower import check
from xlacs_server.passes.registry import Grouping, register_pass


def unsupported_regions(graph: Graph, unsupported: set[str]) -> list[dict]:
    """Connected components (through data edges) of unsupported nodes, with their cut inputs and outputs."""
    neighbours: dict[str, set[str]] = {name: set() for name in unsupported}
    for name in unsupported:
        for e in graph.nodes[name].inputs:
            if e.node in unsupported:
                neighbours[name].add(e.node)
                neighbours[e.node].add(name)
    regions, seen = [], set()
    for start in sorted(unsupported):
        if start in seen:
            continue
        stack, members = [start], set()
        while stack:
            name = stack.pop()
            if name not in members:
                members.add(name)
                stack.extend(neighbours[name] - members)
        seen |= members
        inputs = sorted({str(e) for m in members for e in graph.nodes[m].inputs if e.node not in members})
        outputs = sorted({str(e) for node in graph.nodes.values() if node.name not in members
                          for e in node.inputs if e.node in members})
        regions.append({"nodes": sorted(members), "inputs": inputs, "outputs": outputs})
    return regions


@register_pass(Grouping.OPTIMIZATION, phase=0)
def mark_for_compilation(graph: Graph) -> Graph:
    """Raises UnsupportedOps (with the unsupported regions) before any lowering; checks every node's attrs."""
    nodes = [*graph.nodes.values(), *check.function_nodes(graph)]  # and the bodies of called functions
    missing = check.unsupported_ops(nodes, graph.platform)
    if missing:
        regions = unsupported_regions(graph, {n for names in missing.values() for n in names if n in graph.nodes})
        raise UnsupportedOps(missing, graph.platform, regions)
    check.check_nodes(nodes, graph.platform)
    return graph
