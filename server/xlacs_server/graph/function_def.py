"""FunctionDef <-> Graph: a function body as a graph whose `_Arg` nodes are its feeds and whose returns
are its fetches, so that passes and the lowering treat bodies like any graph.

Inside a FunctionDef a node input is an argument name or `node:output_arg:index`; in a Graph it is a
flat `node:index`. op_outputs converts between the two.
"""
from __future__ import annotations

from xlacs import dtypes
from xlacs.v1 import tf_graph_pb2 as tf
from xlacs_server.errors import InvalidGraph
from xlacs_server.graph import attrs, op_outputs
from xlacs_server.graph.importer import export_node, import_nodes
from xlacs_server.graph.ir import Endpoint, FuncRef, Graph, Node
from xlacs_server.graph.op_defs import new_node

ARG_OP = "_Arg"  # TF's own op for a function argument


def function_refs(node: Node) -> list[FuncRef]:
    """The library functions a node's attrs call (If branches, While cond and body, ...)."""
    refs = []
    for value in node.attrs.values():
        refs.extend(item for item in (value if isinstance(value, list) else [value]) if isinstance(item, FuncRef))
    return refs


def call_node(node: Node, fdef: tf.FunctionDef) -> Node:
    """A node whose op is a library function (how TF1's Defun calls one) as the PartitionedCall it means."""
    given = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
    types = {direction: [_arg_dtype(a, given) for a in args]
             for direction, args in (("Tin", fdef.signature.input_arg), ("Tout", fdef.signature.output_arg))}
    return new_node(node.name, "PartitionedCall", node.inputs, node.control_inputs,
                    {**types, "f": FuncRef(node.op, given)}, node.device)


def to_graph(fdef: tf.FunctionDef, func_attrs: dict, max_elements: int, library: dict | None = None) -> Graph:
    """The body of `fdef` instantiated with `func_attrs` (the attrs of the calling FuncRef). With the
    graph's `library`, a node whose op is one of its functions becomes a PartitionedCall."""
    library = library or {}
    name = fdef.signature.name
    node_defs = [_instantiate(nd, func_attrs, name) for nd in fdef.node_def]
    try:
        nodes = import_nodes(node_defs, max_elements)
    except InvalidGraph as e:
        raise InvalidGraph(f"function {name!r}: {e}") from None
    for index, arg in enumerate(fdef.signature.input_arg):
        if arg.name in nodes:
            raise InvalidGraph(f"function {name!r}: argument {arg.name!r} has the name of a node")
        nodes[arg.name] = new_node(arg.name, ARG_OP, [], [], {"T": _arg_dtype(arg, func_attrs), "index": index})
    for node in nodes.values():
        node.inputs = [_resolve(nodes, library, e, name, node.name) for e in node.inputs]
        for control in node.control_inputs:
            if control not in nodes:
                raise InvalidGraph(f"function {name!r}: node {node.name!r} has a control input from "
                                   f"{control!r}, which is not in the function")
    args = [Endpoint(a.name, 0) for a in fdef.signature.input_arg]
    rets = []
    for out in fdef.signature.output_arg:
        if out.name not in fdef.ret:
            raise InvalidGraph(f"function {name!r} does not say what its output {out.name!r} returns")
        rets.append(_resolve(nodes, library, Endpoint.parse(fdef.ret[out.name]), name, f"return {out.name}"))
    nodes = {k: call_node(n, library[n.op]) if n.op in library else n for k, n in nodes.items()}
    return Graph(nodes, feeds=args, fetches=rets)


def from_graph(name: str, graph: Graph, output_dtypes: list) -> tf.FunctionDef:
    """A FunctionDef of `graph`: its feeds, each an `_Arg` node, are the arguments (named after those
    nodes, which must be valid arg names) and its fetches the outputs."""
    fdef = tf.FunctionDef()
    fdef.signature.name = name
    arg_names = {e.node for e in graph.feeds}
    for e in graph.feeds:
        fdef.signature.input_arg.add(name=e.node, type=_enum(graph.nodes[e.node].attrs["T"]))

    def text(e: Endpoint) -> str:
        if e.node in arg_names:
            return e.node
        arg, index = op_outputs.arg_of(graph.nodes[e.node], e.index)
        return f"{e.node}:{arg}:{index}"

    for node in graph.nodes.values():
        if node.name in arg_names:
            continue
        nd = export_node(node)
        del nd.input[:]
        nd.input.extend([text(e) for e in node.inputs] + [f"^{c}" for c in node.control_inputs])
        fdef.node_def.append(nd)
    for index, (e, dtype) in enumerate(zip(graph.fetches, output_dtypes)):
        out = f"output_{index}"
        fdef.signature.output_arg.add(name=out, type=_enum(dtype))
        fdef.ret[out] = text(e)
    return fdef


def _enum(dtype) -> int:
    if isinstance(dtype, attrs.OpaqueDType):
        return tf.DataType.Value(dtype)
    return dtypes.from_numpy(dtype)


def _arg_dtype(arg, func_attrs: dict):
    if arg.type_attr:
        return func_attrs.get(arg.type_attr)
    return attrs.decode(tf.AttrValue(type=arg.type), 0)


def _instantiate(nd: tf.NodeDef, func_attrs: dict, function: str) -> tf.NodeDef:
    """The NodeDef with attr placeholders (`$T` in a generic function) replaced by the caller's values."""
    placeholders = [key for key, value in nd.attr.items() if value.WhichOneof("value") == "placeholder"]
    if not placeholders:
        return nd
    nd = tf.NodeDef.FromString(nd.SerializeToString())
    for key in placeholders:
        wanted = nd.attr[key].placeholder
        if wanted not in func_attrs:
            raise InvalidGraph(f"function {function!r}: node {nd.name!r} attr {key!r} takes the function's "
                               f"attr {wanted!r}, which the call does not set")
        nd.attr[key].CopyFrom(attrs.encode(func_attrs[wanted]))
    return nd


def _resolve(nodes: dict[str, Node], library: dict, parsed: Endpoint, function: str, reader: str) -> Endpoint:
    """A FunctionDef input as a flat Endpoint. Endpoint.parse reads `node:out_arg:index` as node
    `node:out_arg` and `arg` or `arg:0` as themselves; the output arg name is resolved here, through the
    op's outputs or, for a call of a library function, the function's."""
    node, _, out_arg = parsed.node.partition(":")
    if node not in nodes:
        raise InvalidGraph(f"function {function!r}: {reader!r} reads {str(parsed)!r}; {node!r} is neither "
                           "an argument nor a node of the function")
    if not out_arg:
        return parsed
    called = library.get(nodes[node].op)
    try:
        if called is None:
            return Endpoint(node, op_outputs.flat_index(nodes[node], out_arg, parsed.index))
        outputs = [a.name for a in called.signature.output_arg]
        if out_arg not in outputs or parsed.index != 0:
            raise ValueError(f"function {called.signature.name!r} has outputs {outputs}")
        return Endpoint(node, outputs.index(out_arg))
    except ValueError as e:
        raise InvalidGraph(f"function {function!r}: {reader!r} reads {str(parsed)!r}: {e}") from None
