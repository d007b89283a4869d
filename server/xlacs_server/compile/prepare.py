"""The prepare split: a program's weight-only part becomes a program of its own, the prepare program, which runs
once per weight set when weights are bound; the per-call program takes its results, the prepared weights.

Lifted weights are parameters, so XLA cannot fold what is computed from them alone (a BatchNorm's scale and
shift, a kernel scaled by it, a transposed or reshaped kernel): without the split every call would compute it
again. TF's grappler, OpenVINO and ONNX Runtime do the same at load time. The executable stays a function of
the weights' shapes only, so a new checkpoint of the same architecture is still a cache hit.
"""
from __future__ import annotations

import dataclasses

from xlacs_server.graph.ir import Graph
from xlacs_server.unit.weights import canonical_order, weight_only


@dataclasses.dataclass(frozen=True)
class Split:
    """`prepare` maps the lifted weights it reads (its params) to the prepared weights (its fetches); `call` is the
    graph without the weight-only part: the prepared weights are its parameters after the lifted weights it
    still reads (its prepared_specs are the prepare program's output types, which the compiler fills in)."""
    prepare: Graph
    call: Graph


def split(graph: Graph) -> Split | None:
    """The graph's prepare and per-call parts, or None when no weight-only tensor is read by the rest."""
    only = weight_only(graph)
    prepared = {e for node in graph.nodes.values() if node.name not in only for e in node.inputs if e.node in only}
    prepared |= {e for e in graph.fetches if e.node in only}
    if not prepared:
        return None
    # In canonical order, so that graphs that differ in node names or order get the same programs.
    position = {name: i for i, name in enumerate(canonical_order(graph))}
    prepared = sorted(prepared, key=lambda e: (position.get(e.node, len(position)), e.node, e.index))
    boundary = {e.node for e in prepared}

    ancestors = graph.reachable(boundary)
    prepare = Graph({n: node for n, node in graph.nodes.items() if n in ancestors}, graph.library, graph.producer,
                    fetches=prepared, params=[e for e in graph.params if e.node in ancestors],
                    platform=graph.platform)

    # The per-call part: what the fetches reach without looking past a prepared node, which keeps no inputs (as a
    # fed node does); a control edge on a dropped weight-only node orders nothing, since such a node has no effect.
    kept = graph.reachable([e.node for e in graph.fetches], stop=boundary)
    nodes = {}
    for name, node in graph.nodes.items():
        if name in boundary:
            nodes[name] = dataclasses.replace(node, inputs=[], control_inputs=[])
        elif name in kept:
            nodes[name] = dataclasses.replace(node, control_inputs=[c for c in node.control_inputs if c in kept])
    call = graph.replace(nodes=nodes, params=[e for e in graph.params if e.node in kept], prepared=prepared)
    return Split(prepare, call)
