"""Inference BatchNorms folded into the convolution or matmul before them, as TF's grappler, OpenVINO and ONNX
Runtime do at load time:

    BN(conv(x, W) [+ b]) = conv(x, W * s) + ([b - mean] * s + offset),  s = scale * rsqrt(variance + epsilon)

for Conv2D, DepthwiseConv2dNative and MatMul, optionally through a BiasAdd, followed by a FusedBatchNorm(V2, V3)
with is_training=false, or by the Mul that frozen Keras graphs compute a BatchNorm with (conv * s, then an Add
that stays). The rewrite is graph ops: W * s and the new bias are computed from weights alone, so they land in
the prepare program (compile/prepare.py) and a call runs the convolution and one add.

Folded only when every weight-side operand is a constant or computed from weights alone (unit.weights.weight_only),
the convolution (and the BiasAdd) feed the BatchNorm alone, and dtypes and layouts agree. Filter layouts:
HWIO (s scales O), depthwise H W C M (s reshaped to [C, M]), MatMul [K, N] or, transposed, [N, K].
"""
from __future__ import annotations

import dataclasses

import numpy as np

from xlacs_server.graph.attrs import Shape
from xlacs_server.graph.ir import Endpoint, Graph, Node
from xlacs_server.graph.op_defs import new_node
from xlacs_server.passes.registry import Grouping, register_pass
from xlacs_server.unit.weights import weight_only

CONVOLUTIONS = {"Conv2D", "DepthwiseConv2dNative", "MatMul"}
BATCH_NORMS = {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"}


@dataclasses.dataclass(frozen=True)
class _Fold:
    root: Node  # the BatchNorm or the Mul: its output 0 becomes the folded output
    conv: Node
    bias_add: Node | None
    dtype: np.dtype
    data_format: str
    channels: int  # the output channels
    filter_channels: tuple[int, ...]  # the shape s takes to scale the filter
    filter_shape: tuple[int, ...]
    scale: Endpoint  # the BatchNorm's scale (FusedBatchNorm) or s (Mul)
    shift: tuple[Endpoint, Endpoint, Endpoint, float] | None  # (offset, mean, variance, epsilon) of a FusedBatchNorm


@register_pass(Grouping.PRE_LOWERING, phase=20)
def fold_batch_norm(graph: Graph) -> Graph:
    only = weight_only(graph)
    readers = graph.consumers()
    for e in graph.fetches:
        readers[e.node].append("")  # a fetched node has a reader outside the graph
    nodes = dict(graph.nodes)
    for node in graph.topological_order():
        fold = _match(graph, node, only, readers)
        if fold is not None:
            _rewrite(nodes, fold)
    return graph.replace(nodes=nodes)


def _is_weight(graph: Graph, e: Endpoint, only: set[str]) -> bool:
    return graph.nodes[e.node].op == "Const" or e.node in only


def _shape(graph: Graph, e: Endpoint) -> tuple | None:
    node = graph.nodes[e.node]
    if node.op == "Const":
        return np.shape(node.attrs["value"])
    shapes = node.attrs.get("_output_shapes")
    return tuple(shapes[e.index]) if shapes is not None and e.index < len(shapes) else None


def _source(graph: Graph, e: Endpoint, readers, ops) -> Node | None:
    """The node of `e` if its op is one of `ops`, it has one output read, and its reader is the only one."""
    node = graph.nodes[e.node]
    return node if node.op in ops and e.index == 0 and len(readers[node.name]) == 1 else None


def _match(graph: Graph, node: Node, only: set[str], readers) -> _Fold | None:
    if node.op in BATCH_NORMS:
        attrs = node.attrs
        # FusedBatchNorm (V1) has no U: its statistics are of T.
        if attrs["is_training"] or attrs.get("U", attrs["T"]) != attrs["T"] or _reads_statistics(graph, node, readers) \
                or not all(_is_weight(graph, e, only) for e in node.inputs[1:5]):
            return None
        input_, data_format, scale = node.inputs[0], attrs["data_format"], node.inputs[1]
        shift = (node.inputs[2], node.inputs[3], node.inputs[4], float(attrs["epsilon"]))
    elif node.op == "Mul":
        for input_, scale in (node.inputs, node.inputs[::-1]):
            if _is_weight(graph, scale, only) and not _is_weight(graph, input_, only):
                break
        else:
            return None
        data_format, shift = "NHWC", None
    else:
        return None
    bias_add = _source(graph, input_, readers, {"BiasAdd"})
    conv = _source(graph, bias_add.inputs[0] if bias_add else input_, readers, CONVOLUTIONS)
    if conv is None or not _is_weight(graph, conv.inputs[1], only):
        return None
    attrs = conv.attrs
    # A MatMul has no data_format: its output's channels are last, as NHWC's.
    layouts = {"NHWC" if conv.op == "MatMul" else attrs["data_format"], data_format} | \
        ({bias_add.attrs["data_format"]} if bias_add else set())
    filter_shape = _shape(graph, conv.inputs[1])
    scale_shape = _shape(graph, scale)
    if len(layouts) != 1 or filter_shape is None or scale_shape is None or attrs["T"] != node.attrs["T"] or \
            (conv.op == "MatMul" and node.op != "Mul"):
        return None
    filter_channels = tuple(filter_shape[2:]) if conv.op == "DepthwiseConv2dNative" else \
        (filter_shape[0], 1) if conv.op == "MatMul" and attrs["transpose_b"] else (filter_shape[-1],)
    channels = int(np.prod(filter_channels))
    # s must scale the output channels: [C] (or ones then C, broadcasting along the last axis in NHWC).
    if node.op == "Mul" and (layouts != {"NHWC"} or not scale_shape or scale_shape[-1] != channels or
                             any(d != 1 for d in scale_shape[:-1])):
        return None
    return _Fold(node, conv, bias_add, attrs["T"], data_format, channels, filter_channels, tuple(filter_shape), scale,
                 shift)


def _reads_statistics(graph: Graph, node: Node, readers) -> bool:
    """Whether something reads an output of the BatchNorm other than y (its batch statistics)."""
    endpoints = [*graph.fetches, *(e for r in set(readers[node.name]) if r for e in graph.nodes[r].inputs)]
    return any(e.node == node.name and e.index != 0 for e in endpoints)


def _rewrite(nodes: dict[str, Node], fold: _Fold) -> None:
    """Replaces the BatchNorm (or Mul), the convolution and the BiasAdd in `nodes` by conv(x, W * s) [+ bias],
    under the BatchNorm's name, so that its readers read the folded output."""
    root, conv, t = fold.root, fold.conv, {"T": fold.dtype}

    def add(suffix: str, op: str, inputs: list[Endpoint], attrs: dict) -> Endpoint:
        name = f"{root.name}/folded/{suffix}"
        while name in nodes:  # a graph may use any name
            name += "_"
        nodes[name] = new_node(name, op, inputs, [], attrs, conv.device)
        return Endpoint(name)

    def const(suffix: str, value: np.ndarray) -> Endpoint:
        return add(suffix, "Const", [], {"value": value, "dtype": value.dtype})

    def reshape(suffix: str, x: Endpoint, shape: tuple[int, ...]) -> Endpoint:
        return add(suffix, "Reshape", [x, const(f"{suffix}/shape", np.asarray(shape, np.int32))],
                   {**t, "Tshape": np.dtype(np.int32)})

    s = reshape("scale", fold.scale, (fold.channels,))
    bias = None
    if fold.shift is not None:
        offset, mean, variance, epsilon = fold.shift
        shifted = add("variance_epsilon", "AddV2", [variance, const("epsilon", np.asarray(epsilon, fold.dtype))], t)
        s = add("s", "Mul", [s, add("rsqrt", "Rsqrt", [shifted], t)], t)
        bias = add("shift", "Sub", [offset, add("mean_s", "Mul", [mean, s], t)], t)
    if fold.bias_add is not None:
        scaled = add("bias_s", "Mul", [fold.bias_add.inputs[1], s], t)
        bias = scaled if bias is None else add("bias", "AddV2", [scaled, bias], t)
        del nodes[fold.bias_add.name]
    # The scaled filter keeps the filter's shape, which the passes after this one read (passes/winograd.py).
    filter_ = add("filter", "Mul", [fold.conv.inputs[1], reshape("filter_scale", s, fold.filter_channels)],
                  {**t, "_output_shapes": [Shape(fold.filter_shape)]})
    control = list(dict.fromkeys([*conv.control_inputs, *root.control_inputs]))
    if bias is None:
        del nodes[conv.name]
        nodes[root.name] = dataclasses.replace(conv, name=root.name, inputs=[conv.inputs[0], filter_],
                                               control_inputs=control)
    else:
        nodes[conv.name] = dataclasses.replace(conv, inputs=[conv.inputs[0], filter_])
        nodes[root.name] = new_node(root.name, "BiasAdd", [Endpoint(conv.name), bias], control,
                                    {**t, "data_format": fold.data_format}, root.device)
