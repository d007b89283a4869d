"""Graphs of tf.while_loop, tf.cond and tf.switch_case compile through the service and match TensorFlow,
frozen with lowered control flow (TF1 Switch/Merge/Enter/Exit, functionalized by xlacs) and without
(functional While/If with a function library); and the same built with TF1's own control flow."""
import numpy as np
import pytest
import tensorflow as tf

from tests import tf1
from tests.oracle import assert_close, compile_and_compare

LOWER = pytest.mark.parametrize("lower_control_flow", [True, False], ids=["lowered", "functional"])
rng = np.random.default_rng(0)


def x_of(shape=(3, 4)):
    return rng.normal(size=shape).astype(np.float32)


def while_loop(x):
    def body(i, acc, total):
        acc = tf.tanh(acc * 1.5 + tf.cast(i, tf.float32))
        return i + 1, acc, total + tf.reduce_sum(acc)
    return tf.while_loop(lambda i, acc, total: i < 6, body, (0, x, 0.0))[1:]


def nested_while_loops(x):
    def outer(i, acc):
        inner = tf.while_loop(lambda j, a: j < i + 2, lambda j, a: (j + 1, a * 0.9 + tf.cast(j, tf.float32)),
                              (0, acc))
        return i + 1, tf.sin(inner[1])
    return tf.while_loop(lambda i, acc: i < 3, outer, (0, x))[1]


def cond(x):
    return tf.cond(tf.reduce_sum(x) > 0, lambda: (x * 2.0, tf.reduce_max(x)), lambda: (x - 1.0, tf.reduce_min(x)))


def cond_in_loop(x):
    def body(i, acc):
        return i + 1, tf.cond(tf.reduce_mean(acc) > 0.1, lambda: acc - 0.3, lambda: acc * -1.5 + 0.2)
    return tf.while_loop(lambda i, acc: i < 5, body, (0, x))[1]


def nested_cond(x):
    total = tf.reduce_sum(x)
    return tf.cond(total > 0, lambda: tf.cond(total > 1, lambda: x * 3.0, lambda: x + 1.0), lambda: -x)


@LOWER
@pytest.mark.parametrize("fn", [while_loop, nested_while_loops, cond_in_loop], ids=lambda f: f.__name__)
def test_loops(client, fn, lower_control_flow):
    compile_and_compare(client, fn, [x_of()], lower_control_flow=lower_control_flow)


@LOWER
@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["then", "else"])
@pytest.mark.parametrize("fn", [cond, nested_cond], ids=lambda f: f.__name__)
def test_conds_take_each_branch(client, fn, sign, lower_control_flow):
    x = np.abs(x_of()) * sign
    compile_and_compare(client, fn, [x], lower_control_flow=lower_control_flow)


def switch_case(x, k):
    return tf.switch_case(k, [lambda: x + 1.0, lambda: tf.exp(x), lambda: x * -2.0])


@LOWER
@pytest.mark.parametrize("k", [0, 1, 2, 7, -1])  # out of range runs the last branch
def test_switch_case(client, k, lower_control_flow):
    compile_and_compare(client, switch_case, [x_of(), np.int32(k)], lower_control_flow=lower_control_flow)


def loop_of_constants(x):
    """Every carry starts as a constant: the loop must still run, in the program."""
    i, v = tf.while_loop(lambda i, v: i < 4, lambda i, v: (i + 1, v * 2.0 + 1.0), (0, tf.constant([1.0, -1.0])))
    return x + v[0] + tf.cast(i, tf.float32)


def loop_with_static_shape(x):
    """A shape carried unchanged through the loop feeds a Reshape in the body: it must stay static."""
    def body(i, acc, shape):
        flat = tf.reshape(acc, [-1]) * 0.5
        return i + 1, tf.reshape(flat + 1.0, shape), shape
    return tf.while_loop(lambda i, acc, shape: i < 3, body, (0, x, tf.shape(x)),
                         shape_invariants=(tf.TensorShape([]), tf.TensorShape(None), tf.TensorShape([2])))[1]


@LOWER
@pytest.mark.parametrize("fn", [loop_of_constants, loop_with_static_shape], ids=lambda f: f.__name__)
def test_loops_over_constants(client, fn, lower_control_flow):
    compile_and_compare(client, fn, [x_of()], lower_control_flow=lower_control_flow)


def case_chain(x):
    total = tf.reduce_sum(x)
    return tf.case([(total > 1.0, lambda: x * 2.0), (total > -1.0, lambda: x + 5.0)], default=lambda: -x)


def loop_in_cond(x):
    return tf.cond(tf.reduce_sum(x) > 0, lambda: tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 2.0),
                                                                (0, x))[1], lambda: -x)


def data_dependent_trip_count(x):
    steps = tf.cast(tf.reduce_sum(tf.abs(x)) * 2.0, tf.int32)
    return tf.while_loop(lambda i, total: i < steps, lambda i, total: (i + 1, total + i), (0, 0))[1]


@LOWER
@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["positive", "negative"])
@pytest.mark.parametrize("fn", [case_chain, loop_in_cond, data_dependent_trip_count], ids=lambda f: f.__name__)
def test_more_structures(client, fn, sign, lower_control_flow):
    compile_and_compare(client, fn, [np.abs(x_of()) * sign], lower_control_flow=lower_control_flow)


TF1_GRAPHS = {  # built with TF1's own control flow (as old frozen models have it), not lowered from TF2's
    "cond": lambda x: tf.cond(tf.reduce_sum(x) > 0, lambda: x * 2.0 + 1.0, lambda: tf.constant([7.0, 8.0, 9.0])),
    "cond_in_loop": lambda x: tf.while_loop(
        lambda i, a: i < 5, lambda i, a: (i + 1, tf.cond(tf.reduce_sum(a) > 0, lambda: a - 1.5, lambda: a * -2.0)),
        (tf.constant(0), x))[1],
    "nested_loops": lambda x: tf.while_loop(
        lambda i, a: i < 4, lambda i, a: (i + 1, tf.while_loop(lambda j, b: j < i, lambda j, b: (j + 1, b * 0.9 + 0.1),
                                                               (tf.constant(0), a))[1]), (tf.constant(0), x))[1],
    "case": lambda x: tf.case([(tf.reduce_sum(x) > 1.0, lambda: x * 3.0)], default=lambda: x - 1.0),
}


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["positive", "negative"])
@pytest.mark.parametrize("name", sorted(TF1_GRAPHS))
def test_tf1_control_flow(client, name, sign):
    graph = tf.Graph()
    with tf1.control_flow_v1(), graph.as_default():
        tf.identity(TF1_GRAPHS[name](tf.compat.v1.placeholder(tf.float32, [3], name="x")), name="y")
    assert "Switch" in {n.op for n in graph.as_graph_def().node}
    x = np.array([0.5, 1.0, 2.0], np.float32) * sign
    got, = client.compile(graph.as_graph_def(), {"x:0": (np.float32, (3,))}, ["y:0"]).execute({"x:0": x})
    assert_close(got, tf1.run(graph, {"x:0": x}, "y:0"))
