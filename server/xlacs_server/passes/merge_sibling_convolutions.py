"""Sibling convolutions merged into one wider convolution: Conv2D nodes that read the same input with the same
attrs, filters of the same window computed from weights and constants alone, and no control inputs, become one
Conv2D over their filters concatenated along the output channels, and a SplitV gives each its part back. When a
BiasAdd of such a bias alone reads every one of them, the BiasAdds merge too, so that the split comes last:

    conv(x, W1) + b1, conv(x, W2) + b2  ->  split(conv(x, concat(W1, W2)) + concat(b1, b2))

Inception blocks open with three 1x1 convolutions of one input and ResNet50's first block of a stage with two
(the shortcut and the branch); XLA:CPU runs such a group as one matrix multiply up to 2.7x faster than one by one
(docs/performance.md). The concatenated filters and biases are computed from weights alone, so they run in the
prepare program (compile/prepare.py). Each merged node's name stays, as an Identity of its part, for the readers,
the fetches and the control edges that name it.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np

from xlacs_server.graph.ir import Endpoint, Graph, Node
from xlacs_server.graph.op_defs import default_attrs
from xlacs_server.lower import registry
from xlacs_server.passes.new_nodes import NewNodes
from xlacs_server.passes.registry import Grouping, register_pass

# Ops whose output shape is their inputs' broadcast: the kernels fold_batch_norm scales are such products.
ELEMENTWISE = {"Mul", "AddV2", "Add", "Sub"}
INFERRED = ("_output_shapes", "_output_dtypes")


@dataclasses.dataclass(frozen=True)
class _Sibling:
    conv: Node
    bias_add: Node | None  # the conv's only reader, if a BiasAdd that may merge with it
    channels: int  # output channels


@register_pass(Grouping.PRE_LOWERING, phase=30)
def merge_sibling_convolutions(graph: Graph) -> Graph:
    side = _weight_side(graph)
    readers = graph.consumers()
    fetched = {e.node for e in graph.fetches}
    groups: dict[tuple, list[_Sibling]] = defaultdict(list)
    for node in graph.topological_order():
        if node.op == "Conv2D" and not node.control_inputs and node.inputs[1].node in side and \
                node.inputs[0].node not in side:
            filter_shape = _shape(graph, node.inputs[1])
            if filter_shape is not None and len(filter_shape) == 4:
                key = (node.inputs[0], node.device, filter_shape[:3], _signature(node))
                groups[key].append(_Sibling(node, _bias_add(graph, node, side, readers, fetched),
                                            int(filter_shape[3])))
    nodes = dict(graph.nodes)
    for siblings in groups.values():
        if len(siblings) > 1:
            _merge(nodes, siblings)
    return graph.replace(nodes=nodes)


def _weight_side(graph: Graph) -> set[str]:
    """Constants and what foldable ops compute from them alone: lifted weights, and no feed or variable."""
    fed = {e.node for e in [*graph.feeds, *graph.variables]}
    side: set[str] = set()
    for node in graph.topological_order():
        sources = {e.node for e in node.inputs} | set(node.control_inputs)
        lowering = registry.lookup(node.op, graph.platform)
        if node.name not in fed and (node.op == "Const" or sources and sources <= side and lowering is not None
                                     and lowering.foldable):
            side.add(node.name)
    return side


def _signature(node: Node) -> str:
    """The node's op and attrs (defaults included, `_` ones not), comparable across nodes."""
    return repr((node.op, sorted((k, v) for k, v in {**default_attrs(node.op), **node.attrs}.items()
                                 if not k.startswith("_"))))


def _shape(graph: Graph, e: Endpoint) -> tuple | None:
    """The static shape of a weight-side endpoint, where the graph tells it."""
    node = graph.nodes[e.node]
    if node.op == "Const":
        return np.shape(node.attrs["value"])
    if "_output_shapes" in node.attrs:
        return tuple(node.attrs["_output_shapes"][e.index])
    if node.op in ELEMENTWISE:
        shapes = [_shape(graph, i) for i in node.inputs]
        return None if None in shapes else np.broadcast_shapes(*shapes)
    if node.op == "Reshape" and graph.nodes[node.inputs[1].node].op == "Const":
        shape = tuple(int(d) for d in np.ravel(graph.nodes[node.inputs[1].node].attrs["value"]))
        return None if -1 in shape else shape
    return None


def _bias_add(graph: Graph, conv: Node, side: set[str], readers, fetched: set[str]) -> Node | None:
    """The BiasAdd that alone reads the conv, with a weight-only bias over the same layout, if any."""
    if conv.name in fetched or len(readers[conv.name]) != 1:
        return None
    reader = graph.nodes[readers[conv.name][0]]
    if reader.op != "BiasAdd" or reader.inputs[0] != Endpoint(conv.name) or reader.control_inputs \
            or reader.inputs[1].node not in side or \
            {**default_attrs("BiasAdd"), **reader.attrs}["data_format"] != \
            {**default_attrs("Conv2D"), **conv.attrs}["data_format"]:
        return None
    return reader


def _merge(nodes: dict[str, Node], siblings: list[_Sibling]) -> None:
    first = siblings[0].conv
    dtype = first.attrs["T"]
    channel_axis = 1 if {**default_attrs("Conv2D"), **first.attrs}["data_format"].startswith("NC") else 3

    add = NewNodes(nodes, f"{first.name}/merged", first.device)

    def const(suffix: str, value) -> Endpoint:
        return add.const(suffix, np.asarray(value, np.int32))

    def concat(suffix: str, parts: list[Endpoint], axis: int) -> Endpoint:
        return add(suffix, "ConcatV2", [*parts, const(f"{suffix}/axis", axis)],
                   {"N": len(parts), "T": dtype, "Tidx": np.dtype(np.int32)})

    filter_ = concat("/filter", [s.conv.inputs[1] for s in siblings], 3)
    output = add("", "Conv2D", [first.inputs[0], filter_], {k: v for k, v in first.attrs.items() if k not in INFERRED})
    # The BiasAdds merge when every sibling has one, alike; otherwise they stay, each reading its part.
    bias_adds = [s.bias_add for s in siblings]
    if None in bias_adds or len({_signature(b) for b in bias_adds}) > 1:
        bias_adds = [None] * len(siblings)
    else:
        output = add("/bias_add", "BiasAdd", [output, concat("/bias", [b.inputs[1] for b in bias_adds], 0)],
                     bias_adds[0].attrs)
    split = add("/split", "SplitV", [output, const("/sizes", [s.channels for s in siblings]),
                                     const("/axis", channel_axis)],
                {"num_split": len(siblings), "T": dtype, "Tlen": np.dtype(np.int32)})
    for i, (sibling, bias_add) in enumerate(zip(siblings, bias_adds)):
        if bias_add is not None:
            del nodes[sibling.conv.name]
        output = bias_add or sibling.conv
        nodes[output.name] = Node(output.name, "Identity", [Endpoint(split.node, i)], [], {"T": dtype}, output.device)
