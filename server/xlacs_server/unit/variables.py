"""Resource variables of unfrozen graphs, bound as program inputs. Each variable a graph reaches is an executable
input (`variables/<name>`), supplied at Execute; the values assigned during the run come back as outputs.

A VarHandleOp carries its value's dtype and shape. A tf.function graph captures a variable as a resource
Placeholder whose GraphDef does not say them: the request declares them by feeding that placeholder
(`name:0` with the value's dtype and shape), and the feed turns into the variable input. While the program is
traced, a variable is a VariableRef (lower/variables.py); variable_name there is the name both go by."""
from __future__ import annotations

from xlacs_server.errors import InvalidRequest
from xlacs_server.graph.ir import Endpoint, Graph
from xlacs_server.lower.variables import variable_name

INPUT_PREFIX = "variables/"


def is_variable(node) -> bool:
    """A VarHandleOp, or a resource Placeholder (how a tf.function graph captures a variable)."""
    return node.op == "VarHandleOp" or (node.op == "Placeholder" and node.attrs.get("dtype") == "DT_RESOURCE")


def variable_spec(node, declared: dict[str, tuple]) -> tuple:
    """(dtype, shape) of the variable's value: declared by a feed, or from the VarHandleOp's attrs."""
    if node.name in declared:
        return declared[node.name]
    dtype, shape = (node.attrs.get("dtype"), node.attrs.get("shape")) if node.op == "VarHandleOp" else (None, None)
    if shape is None or any(d < 0 for d in shape) or not hasattr(dtype, "itemsize"):
        raise InvalidRequest(f"variable {variable_name(node)!r} (node {node.name!r}) has no static dtype and shape "
                             f"in the graph; declare them with a feed such as '{node.name}:0' = (dtype, shape), "
                             "or freeze the graph")
    return dtype, tuple(shape)


def bind_variables(graph: Graph, reached: list[str]) -> Graph:
    """The graph with each variable among `reached` nodes (in that order) as a program input; feeds that
    name a variable declare its value's type and leave the feeds."""
    declared = {e.node: spec for e, spec in zip(graph.feeds, graph.feed_specs) if is_variable(graph.nodes[e.node])}
    nodes = [graph.nodes[name] for name in reached if is_variable(graph.nodes[name])]
    feeds = [(e, spec) for e, spec in zip(graph.feeds, graph.feed_specs) if e.node not in declared]
    return graph.replace(feeds=[e for e, _ in feeds], feed_specs=[spec for _, spec in feeds],
                         variables=[Endpoint(n.name, 0) for n in nodes],
                         variable_specs=[variable_spec(n, declared) for n in nodes])
