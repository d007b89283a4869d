"""GraphDef bytes -> Graph, checking that the graph is well formed; Graph -> GraphDef for dumps."""
import numpy as np
from google.protobuf import text_format
from google.protobuf.message import DecodeError

from xlacs import dtypes
from xlacs.v1 import tf_graph_pb2 as tf
from xlacs_server.config import Settings
from xlacs_server.errors import InvalidGraph, LimitExceeded, UnsupportedNode
from xlacs_server.graph import attrs, limits, op_defs, op_outputs, tensor_proto
from xlacs_server.graph.ir import Endpoint, Graph, Node


def parse_graph_def(data: bytes) -> tf.GraphDef:
    graph_def = tf.GraphDef()
    try:
        graph_def.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise InvalidGraph(f"graph_def is not a serialized tensorflow.GraphDef ({len(data)} bytes): {e}") from None
    if not graph_def.node:
        raise InvalidGraph(f"graph_def ({len(data)} bytes) holds no nodes")
    return graph_def


def import_nodes(node_defs, max_elements: int) -> dict[str, Node]:
    """NodeDefs -> Nodes by name, with attrs decoded; inputs are not yet checked against each other."""
    nodes: dict[str, Node] = {}
    for nd in node_defs:
        if not nd.name or not nd.op:
            raise InvalidGraph(f"a node has an empty name or op (name={nd.name!r}, op={nd.op!r})")
        if nd.name in nodes:
            raise InvalidGraph(f"two nodes are named {nd.name!r}")
        op_defs.check_node_def(nd)
        data, control = [], []
        for text in nd.input:
            if text.startswith("^"):
                control.append(text[1:])
            else:
                data.append(Endpoint.parse(text))
        try:
            decoded = {key: attrs.decode(value, max_elements) for key, value in nd.attr.items()}
        except (tensor_proto.BadTensor, dtypes.UnsupportedDType) as e:
            raise InvalidGraph(f"node {nd.name!r} ({nd.op}): {e}") from None
        except tensor_proto.UnsupportedTensor as e:
            raise UnsupportedNode(nd.name, nd.op, str(e)) from None
        except LimitExceeded as e:
            raise LimitExceeded(f"node {nd.name!r} ({nd.op}): {e.what}", e.setting, e.limit) from None
        if nd.op == "Const":
            _check_const(nd, decoded)
        nodes[nd.name] = Node(nd.name, nd.op, data, control, decoded, nd.device)
    return nodes


def _check_const(nd: tf.NodeDef, decoded: dict) -> None:
    """As TF's Const kernel: the value's dtype is the `dtype` attr."""
    value, declared = decoded.get("value"), decoded.get("dtype")
    if isinstance(value, np.ndarray) and declared is not None:
        holds = "DT_STRING" if value.dtype == object else value.dtype
        if holds != declared:
            raise InvalidGraph(f"node {nd.name!r} (Const): attr 'dtype' is {declared}, but its value is a "
                               f"tensor of {holds}; make them agree")


def import_graph(data: bytes, settings: Settings) -> Graph:
    """The graph of a serialized GraphDef, within the settings' limits on its bytes, nodes, function nesting
    and tensor elements, each checked before the work it bounds. Every node, in the graph and in the library's
    functions, holds the attrs its op's OpDef defaults, whether the GraphDef spells them out or not (as TF's
    `strip_default_attrs=True` writes it)."""
    limits.check_bytes(data, settings.max_graph_bytes)
    graph_def = parse_graph_def(data)
    limits.check_nodes(graph_def, settings.max_graph_nodes)
    limits.check_function_depth(graph_def, settings.max_function_depth)
    op_defs.add_default_attrs(graph_def)
    graph = Graph(import_nodes(graph_def.node, settings.max_tensor_elements),
                  {f.signature.name: f for f in graph_def.library.function}, graph_def.versions.producer)
    for node in graph.nodes.values():
        for src in [e.node for e in node.inputs] + node.control_inputs:
            if src not in graph.nodes:
                raise InvalidGraph(f"node {node.name!r} ({node.op}) reads {src!r}, which is not in the graph")
        for e in node.inputs:
            slices = op_outputs.output_slices(graph.nodes[e.node])
            count = None if slices is None else sum(s.count for s in slices)
            if count is not None and e.index >= count:
                raise InvalidGraph(f"node {node.name!r} ({node.op}) reads {e}, but {graph.nodes[e.node].op} node "
                                   f"{e.node!r} has {count} output(s)")
    return graph


def export_node(node: Node) -> tf.NodeDef:
    nd = tf.NodeDef(name=node.name, op=node.op, device=node.device,
                    input=[str(e) for e in node.inputs] + [f"^{c}" for c in node.control_inputs])
    for key, value in node.attrs.items():
        nd.attr[key].CopyFrom(attrs.encode(value))
    return nd


def export_graph(graph: Graph) -> tf.GraphDef:
    graph_def = tf.GraphDef(node=[export_node(n) for n in graph.nodes.values()])
    graph_def.versions.producer = graph.producer
    graph_def.library.function.extend(graph.library.values())
    return graph_def


def graph_text(graph: Graph, max_tensor_bytes: int = 1024) -> str:
    """The graph as pbtxt for dumps; tensors above max_tensor_bytes keep their dtype and shape only."""
    graph_def = export_graph(graph)
    for nd in graph_def.node:
        for value in nd.attr.values():
            if value.HasField("tensor") and len(value.tensor.tensor_content) > max_tensor_bytes:
                value.tensor.ClearField("tensor_content")
    return text_format.MessageToString(graph_def)
