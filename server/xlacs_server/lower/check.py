"""Load-time checks of graph nodes against their registrations: support, attrs and dtypes."""
import dataclasses

from xlacs_server.errors import InvalidNode, UnsupportedNode, UnsupportedOps
from xlacs_server.graph.op_defs import attr_defs
from xlacs_server.graph.function_def import ARG_OP, call_node
from xlacs_server.graph.ir import Graph, Node
from xlacs_server.lower import registry
from xlacs_server.lower.functions import FunctionLibrary

# TF1 dataflow control flow has no lowerings: the FunctionalizeControlFlow pass rewrites it into
# While, If and Case nodes before lowering.
FUNCTIONALIZED_OPS = frozenset({"Enter", "Exit", "NextIteration", "LoopCond", "Switch", "_SwitchN", "Merge"})


def function_nodes(graph: Graph) -> list[Node]:
    """The nodes of every library function that the graph calls, directly or through other functions,
    named `function/node`. Functions nothing calls are not looked at."""
    reached = FunctionLibrary(graph.library).reached(graph_calls(graph))
    return [dataclasses.replace(node, name=f"{function}/{node.name}") for function, body in reached.items()
            for node in body.graph.nodes.values() if node.op != ARG_OP]


def graph_calls(graph: Graph) -> list[Node]:
    """The graph's nodes, with a call by op name (TF1's Defun) as the PartitionedCall it stands for."""
    return [call_node(n, graph.library[n.op]) if n.op in graph.library else n for n in graph.nodes.values()]


def unsupported_ops(nodes, platform: str) -> dict[str, list[str]]:
    """Op type -> the names of the nodes that have no lowering on `platform` (an internal op is none a client's
    graph may use: only a pass writes it, after this check)."""
    missing: dict[str, list[str]] = {}
    for node in nodes:
        lowering = registry.lookup(node.op, platform)
        if node.op not in FUNCTIONALIZED_OPS and (lowering is None or lowering.internal):
            missing.setdefault(node.op, []).append(node.name)
    return missing


def check_nodes(nodes, platform: str) -> None:
    """Raises UnsupportedOps listing every op without a lowering, else checks each node's attrs. Runs after
    functionalization (passes/functionalize.py): TF1 control flow left then is in no loop or cond it could take."""
    nodes = list(nodes)
    missing = unsupported_ops(nodes, platform)
    if missing:
        raise UnsupportedOps(missing, platform)
    for node in nodes:
        if node.op in FUNCTIONALIZED_OPS:
            raise UnsupportedNode(node.name, node.op, "xlacs runs TF1 control flow only as the while loops and conds "
                                  "it functionalizes (Enter, Merge, Switch, NextIteration and Exit in TF1's pattern, "
                                  "in the graph itself), and this node is part of neither")
        check_attrs(node, registry.lookup(node.op, platform))


def check_attrs(node: Node, lowering: registry.Lowering) -> None:
    given = {k for k in node.attrs if not k.startswith("_")}
    unknown = sorted(given - lowering.attrs.keys())
    declared = attr_defs(node.op) or {}
    for name in unknown:  # an attr TF declares is a limit of the lowering; any other, a fault of the graph
        error = UnsupportedNode if name in declared else InvalidNode
        raise error(node.name, node.op, f"unknown attr {name!r}; the lowering takes {sorted(lowering.attrs)}",
                    attr=name)
    missing = sorted(k for k, required in lowering.attrs.items() if required and k not in given)
    if missing:
        raise InvalidNode(node.name, node.op, f"missing required attr(s) {missing}", attr=missing[0])
    if lowering.dtypes is not None and lowering.type_attr in node.attrs:
        dtype = node.attrs[lowering.type_attr]
        if dtype not in lowering.dtypes:
            allowed = sorted(str(d) for d in lowering.dtypes)
            raise UnsupportedNode(node.name, node.op, f"{lowering.type_attr}={dtype} is not supported by the "
                                  f"lowering; allowed: {allowed}", attr=lowering.type_attr)
