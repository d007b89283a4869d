"""Load-time checks of graph nodes against their registrations: support, attrs and dtypes."""
from xlacs_server.errors import LoweringFailed, UnsupportedOps
from xlacs_server.graph.ir import Node
from xlacs_server.lower import registry


def unsupported_ops(nodes, platform: str) -> dict[str, list[str]]:
    """Op type -> the names of the nodes that have no lowering on `platform`."""
    missing: dict[str, list[str]] = {}
    for node in nodes:
        if registry.lookup(node.op, platform) is None:
            missing.setdefault(node.op, []).append(node.name)
    return missing


def check_nodes(nodes, platform: str) -> None:
    """Raises UnsupportedOps listing every op without a lowering, else checks each node's attrs."""
    nodes = list(nodes)
    missing = unsupported_ops(nodes, platform)
    if missing:
        raise UnsupportedOps(missing, platform)
    for node in nodes:
        check_attrs(node, registry.lookup(node.op, platform))


def check_attrs(node: Node, lowering: registry.Lowering) -> None:
    given = {k for k in node.attrs if not k.startswith("_")}
    unknown = sorted(given - lowering.attrs.keys())
    if unknown:
        raise LoweringFailed(node.name, node.op, f"unknown attr(s) {unknown}; the lowering takes "
                                                 f"{sorted(lowering.attrs)}")
    missing = sorted(k for k, required in lowering.attrs.items() if required and k not in given)
    if missing:
        raise LoweringFailed(node.name, node.op, f"missing required attr(s) {missing}")
    if lowering.dtypes is not None and lowering.type_attr in node.attrs:
        dtype = node.attrs[lowering.type_attr]
        if dtype not in lowering.dtypes:
            allowed = sorted(str(d) for d in lowering.dtypes)
            raise LoweringFailed(node.name, node.op, f"{lowering.type_attr}={dtype} is not supported; "
                                                     f"allowed: {allowed}")
