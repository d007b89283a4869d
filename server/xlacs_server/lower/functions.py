"""Library functions as lowering sees them: parsed on first use, traced once per signature, replayed
at every call.

A signature is the function's name and attrs plus, for each input leaf, its value when it is a
compile-time constant (constants are baked into the body, as tf2xla's constant arguments are) or its
shape and dtype otherwise. Tracing records which outputs come out constant, so that shape arithmetic
stays constant across calls.
"""
from __future__ import annotations

import hashlib
from typing import Callable, NamedTuple

import jax
import numpy as np
from jax.extend.core import ClosedJaxpr, jaxpr_as_fun

from xlacs import dtypes
from xlacs_server.errors import InvalidGraph
from xlacs_server.graph import attrs
from xlacs_server.graph.function_def import function_refs, to_graph
from xlacs_server.graph.ir import FuncRef, Graph, Node
from xlacs_server.lower import limits
from xlacs_server.lower.checks import InvalidArgument, Unimplemented
from xlacs_server.lower.context import is_constant
from xlacs_server.lower.tensor_list import StackRef
from xlacs_server.lower.variables import VariableRef

# A resource (variable, stack) passed to a function travels as its value, a pytree, so that bodies can be
# traced, switched and looped over; the caller writes the body's assignments back (write_back).
jax.tree_util.register_pytree_node(VariableRef, lambda ref: ((ref.value,), ref.name),
                                   lambda name, leaves: VariableRef(name, leaves[0]))
RESOURCES = (VariableRef, StackRef)  # cells with a `value` and an `assign` that sets `assigned`


class Body(NamedTuple):
    graph: Graph  # feeds: the arguments; fetches: the returns
    order: list[Node]


class FunctionLibrary:
    """The graph's FunctionDefs, converted to graphs only when a call reaches them, so that functions
    nothing calls (Keras' cuDNN variant of an LSTM, say) never matter."""

    def __init__(self, library: dict):
        self.defs = library
        self.max_elements = limits.max_elements()  # of the compile in scope, for the bodies' constants
        self._bodies: dict[tuple, Body] = {}

    def body(self, ref: FuncRef, caller: str = "") -> Body:
        key = (ref.name, _attrs_key(ref.attrs))
        body = self._bodies.get(key)
        if body is None:
            fdef = self.defs.get(ref.name)
            if fdef is None:
                raise InvalidGraph(f"{caller or 'a node'} calls function {ref.name!r}, which is not in the "
                                   "graph's function library")
            graph = to_graph(fdef, ref.attrs, self.max_elements, self.defs)
            body = self._bodies[key] = Body(graph, graph.topological_order())
        return body

    def reached(self, nodes) -> dict[str, Body]:
        """Every function that `nodes` call, directly or through other functions, by name."""
        reached: dict[str, Body] = {}
        pending = [(node, ref) for node in nodes for ref in function_refs(node)]
        while pending:
            node, ref = pending.pop()
            if ref.name in reached:
                continue
            body = reached[ref.name] = self.body(ref, f"node {node.name!r} ({node.op})")
            pending.extend((n, r) for n in body.graph.nodes.values() for r in function_refs(n))
        return reached


def _attrs_key(values: dict) -> tuple:
    return tuple((k, attrs.encode(v).SerializeToString(deterministic=True)) for k, v in sorted(values.items()))


class Traced(NamedTuple):
    """A function body traced for one signature: a jaxpr over its non-constant input leaves, plus the
    output leaves that came out constant. Its results are the function's outputs and the final values
    of the resources among its arguments."""
    jaxpr: ClosedJaxpr
    out_tree: jax.tree_util.PyTreeDef  # of [outputs, resource values]
    constants: list  # per output leaf: its numpy value, or None where the jaxpr computes it
    writes: tuple[bool, ...]  # per resource argument: whether the body assigns it

    def leaves(self, dynamic: list) -> list:
        """The result leaves, for the non-constant input leaves `dynamic` (values or tracers)."""
        computed = iter(jaxpr_as_fun(self.jaxpr)(*dynamic))
        return [c if c is not None else next(computed) for c in self.constants]

    def apply(self, dynamic: list) -> tuple[list, list]:
        """The outputs and the resources' final values."""
        return tuple(self.out_tree.unflatten(self.leaves(dynamic)))

    def abstract_outputs(self) -> list:
        """The outputs with ShapeDtypeStructs standing for the computed leaves."""
        avals = iter(self.jaxpr.out_avals)
        return self.out_tree.unflatten([c if c is not None else _spec(next(avals)) for c in self.constants])[0]


def resources_in(values) -> list:
    leaves = jax.tree_util.tree_leaves(values, is_leaf=lambda v: isinstance(v, RESOURCES))
    return [v for v in leaves if isinstance(v, RESOURCES)]


def write_back(args, values: list, writes) -> None:
    """Assigns to the resources among `args` the final values a function gave them, where it assigned."""
    for ref, value, written in zip(resources_in(args), values, writes):
        if written:
            ref.assign(value)


def _spec(value) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(np.shape(value), value.dtype)


def leaf_key(leaf) -> tuple:
    if is_constant(leaf):
        return ("constant", leaf.dtype.str, leaf.shape, hashlib.sha256(dtypes.byte_view(leaf)).digest())
    return ("traced", np.dtype(leaf.dtype).str, tuple(np.shape(leaf)))


class TraceCache:
    """Traced bodies by signature, shared by every Lowerer of one program."""

    def __init__(self):
        self._traced: dict[tuple, Traced] = {}

    def __len__(self) -> int:
        return len(self._traced)

    def trace(self, ref: FuncRef, args: list, run: Callable[[list], list]) -> tuple[Traced, list]:
        """The traced body of `ref` for `args` (values, tracers or ShapeDtypeStructs, as pytrees) and the
        non-constant input leaves to apply it to. `run(args)` lowers the body on concrete arguments."""
        leaves, tree = jax.tree_util.tree_flatten(args)
        for leaf in leaves:
            if not hasattr(leaf, "dtype"):
                raise InvalidArgument(f"a {type(leaf).__name__} cannot be passed to function {ref.name!r}: a "
                                      "function takes tensors and lists of tensors")
            if np.dtype(leaf.dtype) == object:
                raise Unimplemented(f"a string tensor cannot be passed to function {ref.name!r}: XLA has no strings")
        dynamic = [leaf for leaf in leaves if not is_constant(leaf)]
        key = (ref.name, _attrs_key(ref.attrs), tree, tuple(leaf_key(leaf) for leaf in leaves))
        traced = self._traced.get(key)
        if traced is None:
            traced = self._traced[key] = _trace(run, leaves, tree)
        return traced, dynamic


def _trace(run: Callable[[list], list], leaves: list, tree) -> Traced:
    positions = [i for i, leaf in enumerate(leaves) if not is_constant(leaf)]
    outputs = {}

    def flat(*dynamic):
        full = list(leaves)
        for i, value in zip(positions, dynamic):
            full[i] = value
        args = tree.unflatten(full)
        resources = resources_in(args)
        result = [run(args), [r.value for r in resources]]
        out_leaves, outputs["tree"] = jax.tree_util.tree_flatten(result)
        outputs["constants"] = [leaf if is_constant(leaf) else None for leaf in out_leaves]
        outputs["writes"] = tuple(r.assigned for r in resources)
        return [leaf for leaf in out_leaves if not is_constant(leaf)]

    jaxpr = jax.make_jaxpr(flat)(*[_spec(leaves[i]) for i in positions])
    return Traced(jaxpr, outputs["tree"], outputs["constants"], outputs["writes"])
