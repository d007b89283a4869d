"""3x3 convolutions of stride 1 as Winograd's F(2x2, 3x3) on XLA:CPU (lower/ops/winograd.py), which does 2.25x
fewer multiplies than the im2col + GEMM XLA:CPU's Eigen runs them as (docs/performance.md measured what it buys).

    Conv2D(x, W)  ->  _WinogradConv2D(x, _WinogradFilter(W))

Rewritten when the filter is a lifted weight or computed from weights alone (after fold_batch_norm, the folded
filter), so that the filter's transform joins the prepare program and runs once per weight set; a filter fed per
call or a program constant keeps the Conv2D (XLA would transform it on every call, or fold it at compile time).
The transformed filter gets no `_output_shapes`: it is 16/9 of the filter, which weight_only's growth bound
(unit/weights.py, meant for broadcasts to an activation's size) would otherwise keep out of the prepare program.
Only float32 NHWC, 3x3, strides and dilations 1, SAME or VALID padding, at least MIN_CHANNELS in and out (below
that the transforms' passes over the activations cost more than the multiplies they save), and at most MAX_TILES
output tiles.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from xlacs_server.graph.ir import Endpoint, Graph, Node
from xlacs_server.graph.op_defs import new_node
from xlacs_server.passes.fold_batch_norm import _shape
from xlacs_server.passes.registry import Grouping, register_pass
from xlacs_server.unit.weights import weight_only

MIN_CHANNELS = 16
# Past this many 2x2 output tiles the transformed tiles (16 x tiles x channels) leave the caches: InceptionV3's
# 147x147x32 -> 64 ran 2.7x slower as F(2x2, 3x3) than directly, its 71x71x80 -> 192 (1296 tiles) 0.47x.
MAX_TILES = 2048


@register_pass(Grouping.PRE_LOWERING, phase=30)
def winograd(graph: Graph) -> Graph:
    if graph.platform != "cpu":
        return graph
    only = weight_only(graph) | {e.node for e in graph.params}
    candidates = [node for node in graph.nodes.values() if node.op == "Conv2D" and _fits(graph, node, only)]
    if not candidates:
        return graph
    nodes = dict(graph.nodes)
    for conv in candidates:
        name = f"{conv.name}/winograd_filter"
        while name in nodes:  # a graph may use any name
            name += "_"
        nodes[name] = new_node(name, "_WinogradFilter", [conv.inputs[1]], [], {"T": np.dtype(np.float32)}, conv.device)
        attrs = {k: v for k, v in conv.attrs.items() if k.startswith("_")} | \
            {"T": np.dtype(np.float32), "padding": conv.attrs["padding"]}
        nodes[conv.name] = dataclasses.replace(conv, op="_WinogradConv2D", inputs=[conv.inputs[0], Endpoint(name)],
                                               attrs=attrs)
    return graph.replace(nodes=nodes)


def _fits(graph: Graph, node: Node, only: set[str]) -> bool:
    attrs = node.attrs
    filter_, input_ = node.inputs[1], node.inputs[0]
    if attrs["T"] != np.float32 or attrs["data_format"] != "NHWC" or attrs["padding"] not in ("SAME", "VALID") or \
            set(attrs["strides"]) != {1} or set(attrs["dilations"]) != {1} or filter_.node not in only:
        return False
    filter_shape, input_shape = _shape(graph, filter_), _shape(graph, input_)
    return filter_shape is not None and input_shape is not None and len(input_shape) == 4 and \
        tuple(filter_shape[:2]) == (3, 3) and min(filter_shape[2:]) >= MIN_CHANNELS and \
        input_shape[3] == filter_shape[2] and _tiles(input_shape, attrs["padding"]) <= MAX_TILES


def _tiles(input_shape, padding: str) -> int:
    """How many 2x2 blocks the output of a 3x3 convolution of stride 1 covers."""
    shrink = 0 if padding == "SAME" else 2
    return int(np.prod([-(-(n - shrink) // 2) for n in input_shape[1:3]]))
