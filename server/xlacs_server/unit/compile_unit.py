"""The compile unit: what the compiler takes from a request, built by one call (`build`)."""
from __future__ import annotations

import dataclasses

from xlacs_server.config import Settings
from xlacs_server.graph.importer import import_graph
from xlacs_server.graph.ir import Graph
from xlacs_server.lower.variables import variable_name
from xlacs_server.tensor_sig import TensorSig
from xlacs_server.unit.signature import Feed, with_signature
from xlacs_server.unit.variables import INPUT_PREFIX, bind_variables
from xlacs_server.unit.weights import canonical_order, lift_weights


@dataclasses.dataclass(frozen=True)
class CompileUnit:
    """The graph with its signature, variables, target platform and lifted weights, and its input signature: the
    feeds, then the variables (`variables/<name>`)."""
    graph: Graph
    inputs: list[TensorSig]


def build(graph_def: bytes, feeds: list[Feed], fetches: list[str], settings: Settings, platform: str) -> CompileUnit:
    """The compile unit of a request for `platform` ("cpu", "gpu"): the GraphDef imported, its feeds and fetches
    checked, the variables the fetches reach bound in canonical order, its weights lifted (settings.lift_*).
    Weights are lifted after the platform is set: which inputs a lowering needs as constants can depend on it."""
    graph = with_signature(import_graph(graph_def, settings), feeds, fetches)
    graph = bind_variables(graph.replace(platform=platform), canonical_order(graph))
    graph = lift_weights(graph, settings.lift_threshold_bytes, settings.lift_min_float_elements)
    inputs = [TensorSig(str(e), dtype, shape) for e, (dtype, shape) in zip(graph.feeds, graph.feed_specs)]
    inputs += [TensorSig(INPUT_PREFIX + variable_name(graph.nodes[e.node]), dtype, shape)
               for e, (dtype, shape) in zip(graph.variables, graph.variable_specs)]
    return CompileUnit(graph, inputs)
