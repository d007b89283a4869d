"""The canonical fingerprint of a compile unit: a Merkle hash over what the fetches reach.

Node names, node order, device strings, `_`-prefixed attrs and debug info do not enter it, nor whether the
GraphDef spelled out the attrs at their OpDef's default (the importer adds them, library included); ops, attrs,
topology, the feed positions, and the values of constants kept in the program do. Lifted weights enter by
position, dtype and shape only. TF1 loop bodies, reached only through
NextIteration back edges, enter through the sorted digests of their NextIteration nodes.
"""
import hashlib

import numpy as np

from xlacs import dtypes
from xlacs_server.graph import attrs, tensor_proto
from xlacs_server.graph.ir import Endpoint, Graph


def attr_digest(value) -> bytes:
    if isinstance(value, np.ndarray) and value.dtype != object:
        splat = tensor_proto.is_splat(value)  # hashed by its one value: a broadcast view is never expanded
        h = hashlib.sha256(f"{'splat' if splat else 'tensor'}:{value.dtype.name}:{value.shape}".encode())
        h.update(dtypes.byte_view(value.reshape(-1)[:1] if splat else value))
        return h.digest()
    return hashlib.sha256(attrs.encode(value).SerializeToString(deterministic=True)).digest()


def fingerprint(graph: Graph) -> str:
    leaves = {e: f"feed:{i}".encode() for i, e in enumerate(graph.feeds)}
    for i, (e, (dtype, shape)) in enumerate(zip(graph.variables, graph.variable_specs)):
        leaves[e] = f"variable:{i}:{dtype}:{shape}".encode()
    for i, e in enumerate(graph.params):
        value = graph.nodes[e.node].attrs["value"]
        leaves[e] = f"param:{i}:{value.dtype.name}:{value.shape}".encode()
    digests: dict[str, bytes] = {}

    def endpoint_digest(e: Endpoint) -> bytes:
        if e in leaves:
            return leaves[e]
        if e.node not in digests:  # a loop back edge: the body enters through its NextIteration
            return f"backedge:{graph.nodes[e.node].op}:{e.index}".encode()
        return digests[e.node] + f":{e.index}".encode()

    leaf_nodes = {e.node: digest for e, digest in leaves.items()}
    for node in graph.topological_order():
        if node.name in leaf_nodes:  # a program input: its value and its own inputs do not matter
            digests[node.name] = leaf_nodes[node.name]
            continue
        h = hashlib.sha256(node.op.encode())
        for key in sorted(k for k in node.attrs if not k.startswith("_")):
            h.update(key.encode())
            h.update(attr_digest(node.attrs[key]))
        for e in node.inputs:
            h.update(b"in:" + endpoint_digest(e))
        for control in sorted(digests.get(c, b"backedge") for c in node.control_inputs):
            h.update(b"ctl:" + control)
        digests[node.name] = h.digest()

    top = hashlib.sha256(f"feeds:{len(graph.feeds)};variables:{len(graph.variables)};"
                         f"params:{len(graph.params)}".encode())
    for e in graph.fetches:
        top.update(b"fetch:" + endpoint_digest(e))
    for loop_body in sorted(d for n, d in digests.items() if graph.nodes[n].op == "NextIteration"):
        top.update(b"loop:" + loop_body)
    for name in sorted(graph.library):
        top.update(graph.library[name].SerializeToString(deterministic=True))
    return top.hexdigest()
