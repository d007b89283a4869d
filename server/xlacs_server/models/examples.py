"""A SavedModel signature fed serialized tf.Examples: what Estimator's parsing serving input receiver wrote (a DT_STRING
placeholder, `input_example_tensor`, into a ParseExample or ParseExampleV2 node), under the classify and regress
signatures TensorFlow Serving's Classify and Regress run. XLA parses no strings, so the graph is cut at the parse node:
its dense outputs become the compiled program's inputs (named by their feature keys), its keys, dtypes, shapes and
defaults a parse spec that the front end (tfserving/examples.py) applies on the host. String outputs are computed on
the host where they are a constant row of labels tiled by the batch (Estimator's `classes`); any other is refused by
name when asked for (docs/tf_serving.md)."""
from __future__ import annotations

import dataclasses

import numpy as np
from xlacs import dtypes
from xlacs.saved_model import SavedModel, Signature, TensorSpec
from xlacs.v1 import tf_graph_pb2 as tf

from xlacs_server.errors import InvalidRequest, Unimplemented
from xlacs_server.graph.tensor_proto import to_numpy

PARSE_OPS = ("ParseExample", "ParseExampleV2")
FEATURE_DTYPES = (np.dtype(np.float32), np.dtype(np.int64))  # float_list, int64_list (bytes_list: strings)
MAX_CONSTANT = 1 << 16  # elements of a graph constant read on the host (keys, defaults, labels)


@dataclasses.dataclass(frozen=True)
class DenseFeature:
    """A FixedLenFeature of the parse: its key in each Example, dtype, shape in one example, and default (None: the
    feature is required)."""
    key: str
    dtype: np.dtype
    shape: tuple[int, ...]
    default: np.ndarray | None


@dataclasses.dataclass(frozen=True)
class ExampleSignature:
    """How a signature's one input, serialized tf.Examples, becomes the compiled program's inputs, and its string
    outputs: `labels` by alias (one row, tiled by the batch), `refused` by alias (why xlacs cannot compute it)."""
    input: str
    features: tuple[DenseFeature, ...]
    labels: dict[str, np.ndarray]
    refused: dict[str, str]


def read(saved: SavedModel, key: str) -> tuple[Signature, ExampleSignature] | None:
    """The signature `key` cut at its ParseExample, as xlacs compiles it (inputs: the dense features; outputs: the
    numeric ones) with its ExampleSignature; None for a signature without a DT_STRING input."""
    signature_def = saved.meta_graph.signature_def.get(key)
    if signature_def is None or all(i.dtype != tf.DT_STRING for i in signature_def.inputs.values()):
        return None
    where = f"signature {key!r}"
    if len(signature_def.inputs) != 1:
        raise Unimplemented(f"{where} takes a DT_STRING input beside others ({sorted(signature_def.inputs)}): xlacs "
                            "serves string inputs only as the one input of serialized tf.Examples")
    (alias, info), = signature_def.inputs.items()
    every = {name: out.name for name, out in signature_def.outputs.items()}
    graph = tf.GraphDef.FromString(saved.freeze(list(every.values()), key))
    nodes = {n.name: n for n in graph.node}
    parse = _parse_node(nodes, info.name, f"{where} input {alias!r}")
    try:
        features, outputs = _features(parse, nodes, where)
    except _NotHost as e:
        raise Unimplemented(f"{where}: the keys and defaults of {parse.op} {parse.name!r} come from {e}, not from "
                            "constants") from None
    numeric, labels, refused = {}, {}, {}
    for name, out in sorted(signature_def.outputs.items()):
        if out.dtype != tf.DT_STRING:
            shape = None if out.tensor_shape.unknown_rank else tuple(d.size for d in out.tensor_shape.dim)
            numeric[name] = TensorSpec(out.name, dtypes.to_numpy(out.dtype), shape)
            continue
        try:
            labels[name] = _label_row(nodes, out.name)
        except _NotHost as e:
            refused[name] = (f"{where} output {name!r} (DT_STRING) is computed by {e}; xlacs computes a string "
                             "output only where it is a constant row of labels tiled by the batch (Estimator's "
                             "classes)")
    if not numeric:
        raise Unimplemented(f"{where} has no numeric output: xlacs compiles at least one")
    graph = tf.GraphDef.FromString(saved.freeze([s.tensor for s in numeric.values()], key))
    feeds = _cut(graph, parse.name, outputs, features)
    inputs = {f.key: TensorSpec(feed, f.dtype, (-1, *f.shape)) for f, feed in zip(features, feeds)}
    graph_def = graph.SerializeToString(deterministic=True)
    return Signature(key, graph_def, inputs, numeric), ExampleSignature(alias, features, labels, refused)


def _node(ref: str) -> str:
    return ref.lstrip("^").split(":")[0]


def _parse_node(nodes: dict[str, tf.NodeDef], tensor: str, where: str) -> tf.NodeDef:
    """The one ParseExample node that reads the serialized input (and nothing else does)."""
    readers = [n for n in nodes.values() if any(_node(i) == _node(tensor) for i in n.input)]
    if len(readers) != 1 or readers[0].op not in PARSE_OPS:
        found = ", ".join(f"{n.op} {n.name!r}" for n in readers) or "nothing"
        raise Unimplemented(f"{where} is DT_STRING and read by {found}: xlacs takes string inputs only as serialized "
                            "tf.Examples read by one ParseExample or ParseExampleV2 node")
    return readers[0]


def _features(parse: tf.NodeDef, nodes, where: str) -> tuple[tuple[DenseFeature, ...], list[str]]:
    """The parse's dense features, and the graph's tensor of each; Unimplemented naming what xlacs does not parse."""
    data = [i for i in parse.input if not i.startswith("^")]
    types = [dtypes.to_numpy(t) if t != tf.DT_STRING else None for t in parse.attr["Tdense"].list.type]
    if parse.op == "ParseExample":
        sparse = [_constant(nodes, ref) for ref in data[2:2 + parse.attr["Nsparse"].i]]
        keys = [_constant(nodes, ref) for ref in data[2 + len(sparse):2 + len(sparse) + len(types)]]
        ragged = []
    else:
        sparse, keys, ragged = (list(_constant(nodes, ref).reshape(-1)) for ref in data[2:5])
    keys = [k.item() if isinstance(k, np.ndarray) else k for k in keys]
    sparse = [s.item() if isinstance(s, np.ndarray) else s for s in sparse]
    if sparse or ragged:
        names = ", ".join(repr(k.decode()) for k in sparse + ragged)
        raise Unimplemented(f"{where} parses sparse or ragged features ({names}: VarLenFeature, SparseFeature, "
                            "RaggedFeature), which xlacs does not: it parses dense features (FixedLenFeature)")
    defaults = data[len(data) - len(types):]
    features = []
    for key, dtype, shape_proto, default_ref in zip(keys, types, parse.attr["dense_shapes"].list.shape, defaults):
        name = key.decode()
        shape = tuple(d.size for d in shape_proto.dim)
        if dtype not in FEATURE_DTYPES:
            raise Unimplemented(f"{where} parses feature {name!r} as strings (bytes_list), which xlacs does not "
                                "compile: it parses float_list and int64_list features")
        if shape_proto.unknown_rank or -1 in shape:
            raise Unimplemented(f"{where} parses feature {name!r} with shape {list(shape)}: xlacs parses features of "
                                "a known shape (FixedLenFeature, not FixedLenSequenceFeature)")
        default = _host(nodes, default_ref).astype(dtype)
        if default.size not in (0, 1, int(np.prod(shape))):
            raise InvalidRequest(f"{where}: feature {name!r} has a default of {default.size} values for shape "
                                 f"{list(shape)}")
        default = None if default.size == 0 else np.broadcast_to(default.reshape(-1), (int(np.prod(shape)),))
        features.append(DenseFeature(name, dtype, shape, None if default is None else default.reshape(shape)))
    first = 3 * len(sparse)  # outputs: sparse indices, values and shapes, then the dense values
    return tuple(features), [f"{parse.name}:{first + k}" for k in range(len(features))]


def _cut(graph: tf.GraphDef, parse: str, outputs: list[str], features) -> list[str]:
    """Replaces the parse node with a Placeholder per dense feature (its readers read those); their tensors."""
    taken = {n.name for n in graph.node}
    names = [_unique(f"{parse}/{f.key}", taken) for f in features]
    placeholders = {}
    for output, name, feature in zip(outputs, names, features):
        placeholder = placeholders[output] = tf.NodeDef(name=name, op="Placeholder")
        placeholder.attr["dtype"].type = dtypes.from_numpy(feature.dtype)
        placeholder.attr["shape"].shape.dim.extend(tf.TensorShapeProto.Dim(size=d) for d in (-1, *feature.shape))
    kept = [n for n in graph.node if n.name != parse]
    for node in kept:
        refs = [i if ":" in i or i.startswith("^") else f"{i}:0" for i in node.input if i != f"^{parse}"]
        inputs = [f"{placeholders[i].name}:0" if i in placeholders else i for i in refs]
        del node.input[:]
        node.input.extend(inputs)
    del graph.node[:]
    graph.node.extend(kept + list(placeholders.values()))
    return [f"{name}:0" for name in names]


def _unique(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


class _NotHost(Exception):
    """A node xlacs does not evaluate on the host."""


def _label_row(nodes, tensor: str) -> np.ndarray:
    """The row of labels a string output tiles by the batch: Tile(ExpandDims(labels, 0), [batch, 1])."""
    tile = _through_identities(nodes, tensor)
    if tile.op != "Tile":
        raise _NotHost(f"{tile.op} node {tile.name!r}")
    expand = _through_identities(nodes, tile.input[0])
    if expand.op != "ExpandDims" or _host(nodes, expand.input[1]).reshape(-1).tolist() != [0]:
        raise _NotHost(f"{expand.op} node {expand.name!r}")
    row = _host(nodes, expand.input[0])
    if row.ndim != 1 or row.dtype != object:
        raise _NotHost(f"{expand.op} node {expand.name!r} (of a {row.ndim}-d {row.dtype} tensor)")
    return row


def _through_identities(nodes, ref: str) -> tf.NodeDef:
    node = nodes[_node(ref)]
    while node.op in ("Identity", "Snapshot"):
        node = nodes[_node(node.input[0])]
    return node


def _host(nodes, ref: str) -> np.ndarray:
    """A constant the host computes: a Const, Reshape of one, AsString of integers, Range."""
    node = _through_identities(nodes, ref)
    if node.op == "Const":
        return _constant(nodes, ref)
    if node.op == "Reshape":
        return _host(nodes, node.input[0]).reshape(_host(nodes, node.input[1]))
    if node.op == "Range":
        return np.arange(*(_host(nodes, i).item() for i in node.input[:3]))
    if node.op == "AsString" and node.attr["width"].i <= 0:  # integers print alike at any precision
        values = _host(nodes, node.input[0])
        if values.dtype.kind in "iu":
            return np.vectorize(lambda v: str(v).encode(), otypes=[object])(values)
    raise _NotHost(f"{node.op} node {node.name!r}")


def _constant(nodes, ref: str) -> np.ndarray:
    """A Const's value: numbers as numpy, strings as an object array of bytes."""
    node = _through_identities(nodes, ref)
    if node.op != "Const":
        raise _NotHost(f"{node.op} node {node.name!r}")
    proto = node.attr["value"].tensor
    if proto.dtype != tf.DT_STRING:
        return to_numpy(proto, MAX_CONSTANT)
    shape = tuple(d.size for d in proto.tensor_shape.dim)
    values = list(proto.string_val)
    count = int(np.prod(shape))
    values = values + values[-1:] * (count - len(values)) if values else [b""] * count
    return np.array(values, dtype=object).reshape(shape)
