"""FunctionalizeControlFlow on frozen TF graphs and on hand-made graphs that cannot be functionalized.
(That the functional graphs compute what TF computes is tests/models/test_control_flow_graphs.py's job.)"""
import collections

import jax
import numpy as np
import pytest
import tensorflow as tf

from tests.graphs import GraphBuilder
from tests.oracle import specs_of
from xlacs import freeze
from xlacs_server.config import Settings
from xlacs_server.errors import InvalidGraph
from xlacs_server.graph.function_def import to_graph
from xlacs_server.graph.importer import export_graph, import_graph
from xlacs_server.graph.ir import Endpoint
from xlacs_server.lower.check import FUNCTIONALIZED_OPS
from xlacs_server.lower.engine import build_program
from xlacs_server.passes.functionalize import functionalize_control_flow
from xlacs_server.passes.prune import prune


def lowered(fn, *args):
    """The frozen graph of fn with TF1 control flow, pruned to its fetches."""
    frozen = freeze(tf.function(fn), *specs_of(args), lower_control_flow=True)
    graph = import_graph(frozen.graph_def, Settings())
    return prune(graph.replace(feeds=[Endpoint.parse(f) for f in frozen.feeds],
                               fetches=[Endpoint.parse(f) for f in frozen.fetches]))


def ops(graph) -> collections.Counter:
    return collections.Counter(n.op for n in graph.nodes.values())


def function_ops(graph) -> dict[str, collections.Counter]:
    return {name: ops(to_graph(f, {}, 1 << 20)) for name, f in graph.library.items()}


def nested_loops(x):
    def outer(i, acc):
        return i + 1, tf.while_loop(lambda j, a: j < 2, lambda j, a: (j + 1, a * 2.0), (0, acc))[1]
    return tf.while_loop(lambda i, acc: i < 3, outer, (0, x))[1]


def cond_in_loop(x):
    return tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, tf.cond(a[0] > 0, lambda: a - 1.0, lambda: -a)),
                         (0, x))[1]


def switch_case(x, k):
    return tf.switch_case(k, [lambda: x + 1.0, lambda: x * 2.0, lambda: -x])


X = np.zeros(3, np.float32)


def test_nested_loops_become_nested_whiles():
    graph = lowered(nested_loops, X)
    assert len({n.attrs["frame_name"] for n in graph.nodes.values() if n.op == "Enter"}) == 2
    result = functionalize_control_flow(graph)
    assert not FUNCTIONALIZED_OPS & set(ops(result)) and ops(result)["While"] == 1
    bodies = function_ops(result)
    assert len(bodies) == 4  # outer and inner, each a cond and a body
    assert sum(counts["While"] for counts in bodies.values()) == 1  # the inner loop, in the outer body
    assert not any(FUNCTIONALIZED_OPS & set(counts) for counts in bodies.values())


def test_cond_in_loop_becomes_if_in_the_body():
    result = functionalize_control_flow(lowered(cond_in_loop, X))
    assert ops(result)["While"] == 1
    bodies = function_ops(result)
    assert sum(counts["If"] for counts in bodies.values()) == 1 and len(bodies) == 4


def test_switch_n_becomes_case():
    result = functionalize_control_flow(lowered(switch_case, X, np.int32(0)))
    assert ops(result)["Case"] == 1 and not FUNCTIONALIZED_OPS & set(ops(result))
    case = next(n for n in result.nodes.values() if n.op == "Case")
    assert len(case.attrs["branches"]) == 3


def test_graph_without_control_flow_is_unchanged():
    graph = lowered(lambda x: x * 2.0, X)
    assert functionalize_control_flow(graph) is graph


def test_merge_of_unrelated_switches_names_the_merge():
    b = GraphBuilder()
    b.placeholder("x")
    b.placeholder("p", shape=(), dtype=np.bool_)
    b.placeholder("q", shape=(), dtype=np.bool_)
    b.op("s1", "Switch", "x", "p")
    b.op("s2", "Switch", "x", "q")
    b.op("m", "Merge", "s1:1", "s2:0", N=2)
    with pytest.raises(InvalidGraph, match="cannot functionalize Merge 'm'"):
        functionalize_control_flow(b.graph(["x:0", "p:0", "q:0"], ["m:0"]))


def test_value_from_two_branches_names_the_node():
    b = GraphBuilder()
    b.placeholder("x")
    b.placeholder("p", shape=(), dtype=np.bool_)
    b.op("s", "Switch", "x", "p")
    b.op("both", "AddV2", "s:0", "s:1")
    with pytest.raises(InvalidGraph, match="cannot functionalize node 'both'"):
        functionalize_control_flow(b.graph(["x:0", "p:0"], ["both:0"]))


def loop_graph(extra):
    """A TF1 loop `while i < 3: i += 1` built by hand; `extra(builder)` adds nodes."""
    b = GraphBuilder()
    b.placeholder("i0", shape=(), dtype=np.int32)
    b.const("three", np.int32(3))
    b.op("enter", "Enter", "i0", T=np.int32, frame_name="loop", is_constant=False, parallel_iterations=10)
    b.op("limit", "Enter", "three", T=np.int32, frame_name="loop", is_constant=True, parallel_iterations=10)
    b.op("merge", "Merge", "enter", "next", T=np.int32, N=2)
    b.op("less", "Less", "merge", "limit", T=np.int32)
    b.node("cond", "LoopCond", "less")
    b.op("switch", "Switch", "merge", "cond", T=np.int32)
    b.op("body", "Identity", "switch:1", T=np.int32)
    b.const("one", np.int32(1))
    b.op("one_in_loop", "Enter", "one", T=np.int32, frame_name="loop", is_constant=True, parallel_iterations=10)
    b.op("add", "AddV2", "body", "one_in_loop", T=np.int32)
    b.op("next", "NextIteration", "add", T=np.int32)
    b.op("exit", "Exit", "switch", T=np.int32)
    extra(b)
    return b


def test_hand_made_loop_becomes_a_while():
    graph = loop_graph(lambda b: None).graph(["i0:0"], ["exit:0"])
    result = functionalize_control_flow(graph)
    assert set(ops(result)) == {"Placeholder", "Const", "While"}
    loop = result.nodes["loop/While"]
    assert result.fetches == [Endpoint("loop/While", 0)]
    assert loop.inputs == [Endpoint("i0", 0), Endpoint("three", 0), Endpoint("one", 0)]  # var, then invariants
    assert loop.attrs["T"] == [np.dtype(np.int32)] * 3


def test_value_entering_a_loop_without_enter_names_the_node():
    def bypass(b):
        b.op("bad", "AddV2", "body", "i0", T=np.int32)
        b.op("next", "NextIteration", "bad", T=np.int32)
    b = loop_graph(lambda b: None)
    b.graph_def.node.remove(next(n for n in b.graph_def.node if n.name == "next"))
    bypass(b)
    with pytest.raises(InvalidGraph, match="cannot functionalize node 'bad'.*only an Enter"):
        functionalize_control_flow(b.graph(["i0:0"], ["exit:0"]))


def test_fetching_a_value_inside_a_loop_names_the_loop():
    graph = loop_graph(lambda b: None).graph(["i0:0"], ["exit:0", "add:0"])
    with pytest.raises(InvalidGraph, match="cannot functionalize 'loop/While': a fetch reads add:0"):
        functionalize_control_flow(graph)


def test_two_loop_conds_in_one_frame_names_the_frame():
    def second_cond(b):
        b.node("cond2", "LoopCond", "less")
    graph = loop_graph(second_cond).graph(["i0:0"], ["exit:0"])
    with pytest.raises(InvalidGraph, match="while loop frame 'loop': it has 2 LoopCond nodes"):
        functionalize_control_flow(graph)


def nested_loops_with_conds(x):
    def body(i, a):
        inner = tf.while_loop(lambda j, b: j < 3, lambda j, b: (j + 1, tf.cond(tf.reduce_sum(b) > 0, lambda: b * 0.5,
                                                                               lambda: b + 1.0)), (0, a))[1]
        return i + 1, tf.switch_case(i, [lambda: inner * 0.5, lambda: inner - 2.0])
    return tf.while_loop(lambda i, a: i < 4, body, (0, x))[1]


def test_tensorflow_runs_the_functionalized_graph():
    """The generated While, If and Case nodes and library functions are valid TensorFlow: TF loads the
    rewritten GraphDef and computes what the original computes."""
    x = np.random.default_rng(0).normal(size=(3,)).astype(np.float32)
    graph = functionalize_control_flow(lowered(nested_loops_with_conds, x))
    assert {"While", "If", "Case"} <= set(ops(graph)).union(*function_ops(graph).values())
    graph_def = tf.compat.v1.GraphDef.FromString(export_graph(graph).SerializeToString())
    imported = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(graph_def, name=""), [])
    run = imported.prune([str(e) for e in graph.feeds], [str(e) for e in graph.fetches])
    want = tf.function(nested_loops_with_conds)(tf.constant(x))
    np.testing.assert_allclose(run(tf.constant(x))[0].numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.parametrize("flag", [True, False])
def test_hand_made_cond_reading_an_outside_value_directly(flag):
    """TF1 allows a branch to read a value that does not pass its Switch: it becomes an If input."""
    b = GraphBuilder()
    b.placeholder("x")
    b.placeholder("y")
    b.placeholder("p", shape=(), dtype=np.bool_)
    b.op("s", "Switch", "x", "p")
    b.op("then", "AddV2", "s:1", "y")
    b.op("m", "Merge", "s:0", "then", N=2)
    result = functionalize_control_flow(b.graph(["x:0", "y:0", "p:0"], ["m:0"]))
    assert set(ops(result)) == {"Placeholder", "If"}
    cond = result.nodes["If"]
    assert cond.inputs == [Endpoint("p", 0), Endpoint("x", 0), Endpoint("y", 0)]
    x, y = np.ones((2, 3), np.float32), np.full((2, 3), 2.0, np.float32)
    got, = jax.jit(build_program(result, "cpu"))(x, y, np.bool_(flag))
    np.testing.assert_array_equal(got, x + y if flag else x)
