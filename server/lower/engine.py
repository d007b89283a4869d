"""Symbolic execution of a graph: each node's rule runs on the values of its inputs.

Values are numpy arrays (compile-time constants) or traced JAX values. A node whose inputs are all
constants runs on the host, so shape arithmetic such as Shape -> StridedSlice -> Pack folds to a
constant that a Reshape can take, as tf2xla's XlaExpression constants do.
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from xlacs_server.errors import InvalidRequest, LoweringFailed, NotConstant, XlacsError
from xlacs_server.graph.ir import Endpoint, Graph, Node
from xlacs_server.lower import registry
from xlacs_server.lower.context import LoweringContext, is_constant

# Host folding stops above this many input elements: XLA folds bigger constant work itself.
FOLD_MAX_ELEMENTS = 1 << 22


class Lowerer:
    def __init__(self, graph: Graph, platform: str):
        self.graph = graph
        self.platform = platform

    def run(self, order: list[Node], env: dict[Endpoint, object]) -> None:
        """Lowers `order` (a topological order) in place of env, skipping nodes whose outputs are fed."""
        fed = {e.node for e in env}
        for node in order:
            if node.name not in fed:
                self.run_node(node, env)

    def run_node(self, node: Node, env: dict[Endpoint, object]) -> None:
        lowering = registry.lookup(node.op, self.platform)
        try:
            inputs = [env[e] for e in node.inputs]
        except KeyError as e:
            raise LoweringFailed(node.name, node.op, f"input {e.args[0]} has no value (is it fed?)") from None
        for spec in lowering.constant_inputs:
            index, name = lowering.constant_input_index(spec, len(inputs))
            if not is_constant(inputs[index]):
                raise NotConstant(node.name, node.op, name)
        params = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
        ctx = LoweringContext(node, self.platform, self)
        try:
            if lowering.foldable and all(is_constant(x) for x in inputs) and \
                    sum(x.size for x in inputs) <= FOLD_MAX_ELEMENTS:
                with jax.ensure_compile_time_eval():
                    outputs = [_to_host(v) for v in lowering.rule(ctx, *inputs, **params)]
            else:
                outputs = lowering.rule(ctx, *inputs, **params)
        except XlacsError:
            raise
        except Exception as e:  # a rule rejecting its operands: report it against the node
            raise LoweringFailed(node.name, node.op, f"{type(e).__name__}: {e}") from e
        for index, value in enumerate(outputs):
            env[Endpoint(node.name, index)] = value


def _to_host(value):
    return np.asarray(value) if isinstance(value, (jax.Array, np.ndarray, np.generic)) else value


def build_program(graph: Graph, platform: str) -> Callable:
    """The graph as a JAX function from its feeds then its lifted weights (in order) to its fetches (in order)."""
    order = graph.topological_order()
    lowerer = Lowerer(graph, platform)

    def program(*args):
        env = dict(zip([*graph.feeds, *graph.params], args))
        lowerer.run(order, env)
        missing = [str(f) for f in graph.fetches if f not in env]
        if missing:
            raise InvalidRequest(f"fetch(es) {missing} name outputs that their nodes do not have")
        return [jnp.asarray(env[f]) for f in graph.fetches]

    return program
