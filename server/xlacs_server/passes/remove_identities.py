"""Remove Identity, Snapshot, StopGradient, PreventGradient and NoOp chains, keeping control semantics:
a reader of a removed node reads its source and inherits its control inputs."""
import dataclasses

from xlacs_server.graph.ir import Endpoint, Graph
from xlacs_server.passes.registry import Grouping, register_pass

IDENTITY_OPS = {"Identity", "Snapshot", "StopGradient", "PreventGradient"}
# An Identity right after a Switch is a TF1 conditional's pivot: its deadness matters, keep it.
SWITCH_OPS = {"Switch", "_SwitchN", "RefSwitch"}


@register_pass(Grouping.OPTIMIZATION, phase=10)
def remove_identities(graph: Graph) -> Graph:
    pinned = {e.node for e in [*graph.feeds, *graph.fetches]}
    forward: dict[str, Endpoint] = {}  # removed identity -> the endpoint it passed through
    carried: dict[str, list[str]] = {}  # removed node -> the control inputs its readers inherit

    def controls_for(names) -> list[str]:
        out = []
        for name in names:
            out.extend(carried[name] if name in carried else [name])
        return out

    nodes = {}
    for node in graph.topological_order():
        inputs = [forward.get(e.node, e) for e in node.inputs]
        inherited = [c for e in node.inputs if e.node in forward for c in carried[e.node]]
        control = list(dict.fromkeys(controls_for(node.control_inputs) + inherited))
        removable = node.name not in pinned and (
            node.op == "NoOp" or (node.op in IDENTITY_OPS and len(node.inputs) == 1 and
                                  graph.nodes[node.inputs[0].node].op not in SWITCH_OPS))
        if removable and node.op == "NoOp":
            carried[node.name] = control
        elif removable:
            forward[node.name] = inputs[0]
            carried[node.name] = control
        else:
            nodes[node.name] = dataclasses.replace(node, inputs=inputs, control_inputs=control)
    return graph.replace(nodes={name: nodes[name] for name in graph.nodes if name in nodes})
