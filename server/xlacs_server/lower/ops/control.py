"""Functional control flow: function calls, If and Case, While; lowered to lax.switch and lax.while_loop.

Bodies are library functions, lowered through the engine once per signature. A constant predicate
picks its branch at compile time. A While carry that is a constant stays one while the body returns it
unchanged (loop invariants, such as shapes, must stay static); the other constants become traced
carries, found by tracing the body until nothing changes (as tf2xla does for constant loop arguments).
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import InvalidArgument, Unimplemented
from xlacs_server.lower.context import is_constant
from xlacs_server.lower.functions import resources_in, write_back
from xlacs_server.lower.registry import register_op
from xlacs_server.lower.tensor_list import StackRef, TensorList
from xlacs_server.lower.variables import VariableRef

tree_flatten = jax.tree_util.tree_flatten


@register_op("PartitionedCall", "StatefulPartitionedCall", foldable=False)
def partitioned_call(ctx, *args, Tin, Tout, f, config, config_proto, executor_type):
    return ctx.engine.call(f, list(args))


@register_op("If", "StatelessIf", foldable=False)
def if_(ctx, cond, *inputs, Tcond, Tin, Tout, then_branch, else_branch, output_shapes):
    return branch(ctx, truth(cond), [else_branch, then_branch], list(inputs))


@register_op("Case", "StatelessCase", foldable=False)
def case(ctx, branch_index, *inputs, Tin, Tout, branches, output_shapes):
    last = len(branches) - 1  # an index out of range runs the last branch
    if is_constant(branch_index):
        index = int(branch_index)
        return branch(ctx, np.asarray(index if 0 <= index <= last else last), branches, list(inputs))
    index = jnp.where((branch_index < 0) | (branch_index > last), last, branch_index)
    return branch(ctx, index, branches, list(inputs))


@register_op("ControlTrigger")
def control_trigger(ctx):
    return []


@register_op("While", "StatelessWhile", foldable=False)
def while_(ctx, *inputs, T, cond, body, output_shapes, parallel_iterations):
    return while_loop(ctx, cond, body, list(inputs))


@register_op("ToBool", dtypes=D.ALL)  # tf2xla's types; TF's CPU kernel refuses halves, complex and wide unsigned
def to_bool(ctx, input, *, T):
    return [truth(input)]


def truth(value):
    """TF's predicate (ToBool): a scalar is true when nonzero, any other tensor when it is not empty."""
    if np.ndim(value) != 0:
        return np.asarray(np.size(value) > 0)
    if is_constant(value):
        return np.asarray(value != 0)
    return value if value.dtype == jnp.bool_ else value != 0


def branch(ctx, index, branches: list, inputs: list) -> list:
    """Runs branches[index] on inputs; a traced index becomes a lax.switch over every branch."""
    if is_constant(index):
        return ctx.engine.call(branches[int(index)], inputs)
    traced = [ctx.engine.trace(b, inputs)[0] for b in branches]
    dynamic = [leaf for leaf in jax.tree_util.tree_leaves(inputs) if not is_constant(leaf)]
    outputs = [t.abstract_outputs() for t in traced]
    for b, out in zip(branches[1:], outputs[1:]):
        if len(out) != len(outputs[0]):
            raise InvalidArgument(f"branch {branches[0].name!r} has {len(outputs[0])} outputs, {b.name!r} "
                                  f"{len(out)}: branches must return the same outputs")
        for k, (first, other) in enumerate(zip(outputs[0], out)):
            _check_same_type(first, other, f"output {k}", f"in branch {branches[0].name!r}",
                             f"in branch {b.name!r}", "XLA conditionals return one shape whichever branch runs")
    # Where every branch returns the same constant, the result is that constant.
    shared = [c if all(_same(c, t.constants[i]) for t in traced) else None
              for i, c in enumerate(traced[0].constants)]
    computed = [i for i, c in enumerate(shared) if c is None]

    def run(t):
        def fn(*operands):
            leaves = t.leaves(list(operands))
            return [_strong(leaves[i]) for i in computed]
        return fn

    results = iter(lax.switch(jnp.asarray(index, jnp.int32), [run(t) for t in traced], *dynamic))
    outputs, values = traced[0].out_tree.unflatten([c if c is not None else next(results) for c in shared])
    write_back(inputs, values, [any(w) for w in zip(*(t.writes for t in traced))])
    return outputs


def while_loop(ctx, cond, body, init: list) -> list:
    carried = _fix_carries(ctx, body, init)
    leaves, tree = tree_flatten(carried)
    positions = [i for i, leaf in enumerate(leaves) if not is_constant(leaf)]

    def fill(operands):
        full = list(leaves)
        for i, value in zip(positions, operands):
            full[i] = value
        return tree.unflatten(full)

    probe = _abstract(carried)
    condition = ctx.engine.trace(cond, probe)[0].abstract_outputs()
    if len(condition) != 1:
        raise InvalidArgument(f"the loop condition {cond.name!r} returns {len(condition)} values, not one",
                              attr="cond")
    if is_constant(condition[0]):
        if truth(condition[0]):
            raise InvalidArgument(f"the loop condition {cond.name!r} is always true: the loop never ends",
                                  attr="cond")
        return carried

    def cond_fun(operands):
        return jnp.asarray(truth(ctx.engine.call(cond, fill(operands))[0]))

    def body_fun(operands):
        out = jax.tree_util.tree_leaves(ctx.engine.call(body, fill(operands)))
        return [_strong(out[i]) for i in positions]

    final = fill(lax.while_loop(cond_fun, body_fun, [_strong(leaves[i]) for i in positions]))
    # A resource is a loop variable that the body returns; its final value is the resource's new value.
    writes = ctx.engine.trace(body, probe)[0].writes
    write_back(init, [r.value for r in resources_in(final)], writes)
    return final


def _fix_carries(ctx, body, carried: list) -> list:
    """The loop's carries with every constant the body changes made a traced value, and every list that
    the body first writes given its element shape; checks that the body keeps each carry's type."""
    while True:
        leaves, tree = tree_flatten(carried)
        traced = ctx.engine.trace(body, _abstract(carried))[0]
        out = traced.abstract_outputs()
        if len(out) != len(carried):
            raise InvalidArgument(f"the loop body {body.name!r} returns {len(out)} values for {len(carried)} "
                                  "loop variables", attr="body")
        initialized = [_first_write(c, o) or c for c, o in zip(carried, out)]
        if any(c is not i for c, i in zip(carried, initialized)):
            carried = initialized
            continue
        for k, (before, after) in enumerate(zip(carried, out)):
            _check_same_type(before, after, f"loop variable {k}", f"before the body {body.name!r}", "after it",
                             "XLA loops keep shapes and dtypes")
        changed = [i for i, leaf in enumerate(leaves) if is_constant(leaf) and not _same(leaf, traced.constants[i])]
        if not changed:
            return carried
        for i in changed:
            leaves[i] = jnp.asarray(leaves[i])
        carried = tree.unflatten(leaves)


def _strong(leaf):
    """The leaf as a strongly typed array: lax.switch and lax.while_loop need the same types on all paths."""
    return lax.convert_element_type(leaf, np.dtype(leaf.dtype))


def _first_write(before, after):
    """`before` (a list, or a stack holding one) given the element shape that the body's first write to
    it sets; None when the body does not do that."""
    if isinstance(before, StackRef) and isinstance(after, StackRef):
        inner = _first_write(before.value, after.value)
        return None if inner is None else StackRef(before.name, inner)
    if isinstance(before, TensorList) and isinstance(after, TensorList) and before.data is None \
            and after.data is not None:
        return before.initialized(after.element_shape)
    return None


def _abstract(values: list) -> list:
    """`values` with ShapeDtypeStructs for the traced leaves: what tracing a body needs to know."""
    return jax.tree_util.tree_map(lambda v: v if is_constant(v) else jax.ShapeDtypeStruct(np.shape(v), v.dtype),
                                  values)


def _signature(value) -> tuple:
    leaves, tree = tree_flatten(value)
    return tree, tuple((tuple(np.shape(leaf)), np.dtype(leaf.dtype)) for leaf in leaves)


def _check_same_type(a, b, what: str, where_a: str, where_b: str, why: str) -> None:
    """`a` and `b` have one type: a differing shape is xlacs' limit (TF runs such graphs, XLA needs static
    shapes); a differing dtype or structure, the graph's fault."""
    (tree_a, leaves_a), (tree_b, leaves_b) = _signature(a), _signature(b)
    if (tree_a, leaves_a) == (tree_b, leaves_b):
        return
    message = f"{what} is {_describe(a)} {where_a} and {_describe(b)} {where_b}; {why}"
    if tree_a == tree_b and [dtype for _, dtype in leaves_a] == [dtype for _, dtype in leaves_b]:
        raise Unimplemented(message)
    raise InvalidArgument(message)


def _describe(value) -> str:
    if isinstance(value, (VariableRef, StackRef)):
        return f"resource {value.name!r} holding {_describe(value.value)}"
    if isinstance(value, TensorList):
        return f"a list of {value.max_size} {value.dtype} element(s) of shape {value.element_shape}"
    return f"{np.dtype(value.dtype)}{list(np.shape(value))}"


def _same(a, b) -> bool:
    """Whether two leaves are the same compile-time constant."""
    return is_constant(a) and is_constant(b) and a.dtype == b.dtype and a.shape == b.shape and \
        np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
