"""A frozen graph's weights as values anyone can regenerate: each large float32 constant is replaced by uniform
values of the same standard deviation drawn from its node's name, so that a graph travels as a skeleton of a few
hundred KB (its constants emptied, and one scale per constant) and is filled back to the same bytes elsewhere.
TensorFlow's expected outputs are computed on the filled graph, so the regenerated weights are the weights.

The values come from SHAKE-256 of the name, not from numpy's generators, whose streams may change between numpy
versions: the GPU machine runs another numpy."""
from __future__ import annotations

import hashlib

import numpy as np

from xlacs.v1 import tf_graph_pb2

MIN_ELEMENTS = 4096  # smaller constants (biases, BatchNorm's parameters, shapes) travel as they are
_FLOAT = tf_graph_pb2.DT_FLOAT


def uniform(name: str, shape: tuple[int, ...], scale: float) -> np.ndarray:
    """float32 values in [-scale, scale) from SHAKE-256 of `name`: the same bytes on every machine."""
    count = int(np.prod(shape, dtype=np.int64))
    bits = np.frombuffer(hashlib.shake_256(name.encode()).digest(4 * count), np.uint32)
    unit = (bits >> 8).astype(np.float32) * np.float32(2.0 ** -23) - np.float32(1)
    return (unit * np.float32(scale)).reshape(shape)


def token_ids(name: str, shape: tuple[int, ...], vocabulary: int) -> np.ndarray:
    count = int(np.prod(shape, dtype=np.int64))
    bits = np.frombuffer(hashlib.shake_256(name.encode()).digest(4 * count), np.uint32)
    return (bits % np.uint32(vocabulary)).astype(np.int32).reshape(shape)


def _large_float_constants(graph: tf_graph_pb2.GraphDef):
    for node in graph.node:
        if node.op != "Const":
            continue
        tensor = node.attr["value"].tensor
        shape = tuple(d.size for d in tensor.tensor_shape.dim)
        if tensor.dtype == _FLOAT and tensor.tensor_content and int(np.prod(shape, dtype=np.int64)) >= MIN_ELEMENTS:
            yield node, tensor, shape


def regenerate(graph_def: bytes) -> tuple[bytes, dict[str, float]]:
    """(the graph with each large finite float32 constant regenerated at its own scale, node name -> scale)."""
    graph = tf_graph_pb2.GraphDef.FromString(graph_def)
    scales = {}
    for node, tensor, shape in _large_float_constants(graph):
        values = np.frombuffer(tensor.tensor_content, np.float32)
        if not np.isfinite(values).all():  # a mask of -inf: kept as it is
            continue
        scales[node.name] = float(np.float32(values.std() * np.sqrt(3.0)))
        tensor.tensor_content = uniform(node.name, shape, scales[node.name]).tobytes()
    return graph.SerializeToString(), scales


def skeleton(graph_def: bytes, scales: dict[str, float]) -> bytes:
    """The graph with the regenerated constants emptied."""
    graph = tf_graph_pb2.GraphDef.FromString(graph_def)
    for node, tensor, _ in _large_float_constants(graph):
        if node.name in scales:
            tensor.tensor_content = b""
    return graph.SerializeToString()


def fill(skeleton_def: bytes, scales: dict[str, float]) -> bytes:
    """The skeleton with its constants regenerated: the graph `regenerate` returned."""
    graph = tf_graph_pb2.GraphDef.FromString(skeleton_def)
    for node in graph.node:
        if node.name in scales:
            tensor = node.attr["value"].tensor
            shape = tuple(d.size for d in tensor.tensor_shape.dim)
            tensor.tensor_content = uniform(node.name, shape, scales[node.name]).tobytes()
    missing = set(scales) - {node.name for node in graph.node}
    if missing:
        raise ValueError(f"the skeleton has no constants {sorted(missing)[:5]}: it is not the graph of these scales")
    return graph.SerializeToString()
