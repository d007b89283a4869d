"""Symbolic execution of a graph: each node's rule runs on the values of its inputs.

Values are numpy arrays (compile-time constants), traced JAX values, or pytrees of those (a TensorList).
A node whose inputs are all constants runs on the host, so shape arithmetic such as
Shape -> StridedSlice -> Pack folds to a constant that a Reshape can take, as tf2xla's XlaExpression
constants do. Library functions (the bodies of calls, conditionals and loops) run on Lowerers of
their own that share one FunctionLibrary and one TraceCache.
"""
from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from xlacs_server import metrics
from xlacs_server.errors import (DataDependentShape, InvalidGraph, InvalidNode, InvalidRequest, LoweringError,
                                 NotConstant, XlacsError)
from xlacs_server.graph.ir import Endpoint, FuncRef, Graph, Node
from xlacs_server.graph.tensor_proto import is_splat
from xlacs_server.lower import limits, registry
from xlacs_server.lower.checks import KernelError
from xlacs_server.lower.context import LoweringContext, is_constant
from xlacs_server.lower.functions import FunctionLibrary, TraceCache, Traced, write_back
from xlacs_server.lower.variables import VariableRef, variable_name

# Host folding stops above this many input elements: XLA folds bigger constant work itself.
FOLD_MAX_ELEMENTS = 1 << 22


class Lowerer:
    def __init__(self, graph: Graph, platform: str, *, library: FunctionLibrary | None = None,
                 traces: TraceCache | None = None, scope: str = ""):
        self.graph = graph
        self.platform = platform
        self.library = library or FunctionLibrary(graph.library)
        self.traces = traces or TraceCache()
        self.scope = scope  # "function/" while lowering a function body, so that errors say where

    def run(self, order: list[Node], env: dict[Endpoint, object]) -> None:
        """Lowers `order` (a topological order) in place of env, skipping nodes whose outputs are fed."""
        fed = {e.node for e in env}
        for node in order:
            if node.name not in fed:
                self.run_node(node, env)

    def run_node(self, node: Node, env: dict[Endpoint, object]) -> None:
        name = self.scope + node.name
        lowering = registry.lookup(node.op, self.platform)
        try:
            inputs = [env[e] for e in node.inputs]
        except KeyError as e:
            raise InvalidNode(name, node.op, f"input {e.args[0]} has no value (is it fed?)",
                              input=str(e.args[0])) from None
        for spec in lowering.constant_inputs:
            index, input_name = lowering.constant_input_index(spec, len(inputs))
            if not 0 <= index < len(inputs):
                raise InvalidNode(name, node.op, f"input {input_name!r} is missing: the node has {len(inputs)} "
                                                 "input(s)", input=input_name)
            if not is_constant(inputs[index]):
                raise (DataDependentShape if lowering.data_dependent_shape else NotConstant)(name, node.op, input_name)
        # The importer (and a pass's new_node) gave the node the attrs its OpDef defaults.
        params = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
        ctx = LoweringContext(node, self.platform, self, self.scope)
        try:
            leaves = jax.tree_util.tree_leaves(inputs)
            constant = all(is_constant(x) for x in leaves)
            # It may run on the host, outside any trace; a Const's value was decoded within the limits at import.
            if lowering.foldable and constant and node.op != "Const":
                limits.check_before_folding(name, node.op, lambda: lowering.rule(ctx, *inputs, **params))
            if lowering.foldable and constant and sum(x.size for x in leaves) <= FOLD_MAX_ELEMENTS:
                with jax.ensure_compile_time_eval():
                    outputs = [jax.tree_util.tree_map(_to_host, v) for v in lowering.rule(ctx, *inputs, **params)]
            else:
                fixed = {lowering.constant_input_index(c, len(inputs))[0] for c in lowering.constant_inputs}
                outputs = lowering.rule(ctx, *[x if i in fixed else _broadcast_splat(x) for i, x in enumerate(inputs)],
                                        **params)
        except XlacsError:
            raise
        except KernelError as e:
            raise e.at(name, node.op) from None
        except Exception as e:  # rules raise typed errors for what they check: anything else is a bug of xlacs
            metrics.LOWERING_ERRORS.labels(node.op).inc()
            raise LoweringError(name, node.op, e) from e
        limits.check_outputs(name, node.op, outputs)
        for index, value in enumerate(outputs):
            env[Endpoint(node.name, index)] = value

    # --- Library functions ------------------------------------------------------------------------

    def trace(self, ref: FuncRef, args: list) -> tuple[Traced, list]:
        """The body of `ref` traced for the signature of `args`, once per signature, and the
        non-constant input leaves to apply it to."""
        return self.traces.trace(ref, args, functools.partial(self.run_function, ref))

    def call(self, ref: FuncRef, args: list) -> list:
        """The outputs of function `ref` on `args`; outputs that only depend on constants stay constant."""
        traced, dynamic = self.trace(ref, args)
        outputs, values = traced.apply(dynamic)
        write_back(args, values, traced.writes)
        return outputs

    def run_function(self, ref: FuncRef, args: list) -> list:
        """Lowers the body of `ref` on `args` (prefer `call`, which lowers each signature once)."""
        body = self.library.body(ref)
        if len(args) != len(body.graph.feeds):
            raise InvalidGraph(f"function {ref.name!r} takes {len(body.graph.feeds)} argument(s), "
                               f"not {len(args)}")
        env = dict(zip(body.graph.feeds, args))
        Lowerer(body.graph, self.platform, library=self.library, traces=self.traces,
                scope=f"{self.scope}{ref.name}/").run(body.order, env)
        missing = [str(e) for e in body.graph.fetches if e not in env]
        if missing:
            raise InvalidGraph(f"function {ref.name!r} returns {missing}, which its nodes do not output")
        return [env[e] for e in body.graph.fetches]


def _broadcast_splat(value):
    """A big splat constant (one value broadcast, as a TensorProto of a shape and one value decodes) as a
    broadcast in the program: as a literal it would be expanded in full on the host and in the executable."""
    if isinstance(value, np.ndarray) and value.size > FOLD_MAX_ELEMENTS and value.dtype != object and \
            is_splat(value):
        return jnp.broadcast_to(jnp.asarray(value.reshape(-1)[0]), value.shape)
    return value


def _to_host(value):
    return np.asarray(value) if isinstance(value, (jax.Array, np.ndarray, np.generic)) else value


def argument_specs(graph: Graph) -> list[jax.ShapeDtypeStruct]:
    """The program's arguments: the feeds, then the variables, then the lifted weights, then the prepared ones."""
    weights = [(w.dtype, w.shape) for w in (graph.nodes[e.node].attrs["value"] for e in graph.params)]
    return [jax.ShapeDtypeStruct(shape, dtype)
            for dtype, shape in [*graph.feed_specs, *graph.variable_specs, *weights, *graph.prepared_specs]]


def bind_arguments(graph: Graph, args) -> tuple[dict[Endpoint, object], list[VariableRef]]:
    """The environment that program arguments (in argument_specs order) start a lowering with."""
    env = dict(zip([*graph.feeds, *graph.variables, *graph.params, *graph.prepared], args))
    refs = [VariableRef(variable_name(graph.nodes[e.node]), env[e]) for e in graph.variables]
    env.update(zip(graph.variables, refs))
    return env, refs


def build_program(graph: Graph, platform: str) -> Callable:
    """The graph as a JAX function from its arguments (see argument_specs) to its fetches (in order), then
    the values of the variables it assigned, whose names `program.assigned` lists once it has been traced."""
    order = graph.topological_order()
    lowerer = Lowerer(graph, platform)

    def program(*args):
        env, refs = bind_arguments(graph, args)
        lowerer.run(order, env)
        missing = [str(f) for f in graph.fetches if f not in env]
        if missing:
            raise InvalidRequest(f"fetch(es) {missing} name outputs that their nodes do not have")
        program.assigned = [r.name for r in refs if r.assigned]
        return [jnp.asarray(env[f]) for f in graph.fetches] + [r.value for r in refs if r.assigned]

    return program
