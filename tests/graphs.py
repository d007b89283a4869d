"""Small GraphDefs built node by node (with our own protos) for pass and fingerprint tests."""
import numpy as np

from xlacs.v1 import tf_graph_pb2 as tf
from xlacs_server.config import Settings
from xlacs_server.graph import attrs
from xlacs_server.graph.importer import import_graph
from xlacs_server.graph.ir import Endpoint, Graph


class GraphBuilder:
    def __init__(self):
        self.graph_def = tf.GraphDef()

    def node(self, name, op, *inputs, device="", **attr_values):
        nd = self.graph_def.node.add(name=name, op=op, input=list(inputs), device=device)
        for key, value in attr_values.items():
            nd.attr[key].CopyFrom(attrs.encode(value))
        return name

    def placeholder(self, name, shape=(2, 3), dtype=np.float32):
        return self.node(name, "Placeholder", dtype=np.dtype(dtype), shape=attrs.Shape(shape))

    def const(self, name, value):
        value = np.asarray(value)
        return self.node(name, "Const", value=value, dtype=value.dtype)

    def op(self, name, op, *inputs, T=np.float32, **attr_values):
        return self.node(name, op, *inputs, T=np.dtype(T), **attr_values)

    def bytes(self) -> bytes:
        return self.graph_def.SerializeToString()

    def graph(self, feeds, fetches, platform="cpu") -> Graph:
        graph = import_graph(self.bytes(), Settings())
        fed = [graph.nodes[Endpoint.parse(f).node].attrs for f in feeds]
        specs = [(a.get("dtype", a.get("T")), tuple(a.get("shape", (2, 3)))) for a in fed]
        return graph.replace(feeds=[Endpoint.parse(f) for f in feeds], fetches=[Endpoint.parse(f) for f in fetches],
                             feed_specs=specs, platform=platform)
