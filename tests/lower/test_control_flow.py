"""The function library: calls, functional If/Case/While lowered to JAX control flow, each function
lowered once per signature, unreached functions ignored, and errors that name the node."""
import grpc
import jax
import keras
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import function as tf_function

from tests import tf1
from tests.lower.test_variables import unfrozen
from tests.oracle import assert_close, compile_and_compare, ids, specs_of
from xlacs import freeze
from xlacs_server.config import Settings
from xlacs_server.graph.importer import import_graph
from xlacs_server.graph.ir import Endpoint
from xlacs_server.lower.engine import Lowerer

rng = np.random.default_rng(0)


def traced_graph(fn, args):
    """The graph of tf.function(fn) as traced, unfrozen: nested tf.functions stay PartitionedCalls and
    tf.switch_case a Case, with their bodies in the function library."""
    concrete = tf.function(fn).get_concrete_function(*specs_of(args))
    feeds = {t.name: (t.dtype.as_numpy_dtype, tuple(t.shape)) for t in concrete.inputs}
    return concrete.graph.as_graph_def(), feeds, [t.name for t in concrete.outputs]


def compile_and_compare_traced(client, fn, args):
    graph_def, feeds, fetches = traced_graph(fn, args)
    got = client.compile(graph_def, feeds, fetches).execute(dict(zip(feeds, args)))
    want = fn(*[tf.constant(a) for a in args])
    for g, w in zip(got, want if isinstance(want, (list, tuple)) else [want]):
        assert_close(g, np.asarray(w))
    return graph_def


@tf.function
def affine(a, b):
    return a * b + 1.0, tf.shape(a)


def calls(x, y):
    """Two calls with one signature, one with another; a shape returned by a call feeds a Reshape."""
    z, shape = affine(x, x)
    z, _ = affine(z, x)
    w, _ = affine(y, y)
    return tf.reshape(z, tf.reverse(shape, [0])), w


def test_partitioned_calls(client):
    graph_def = compile_and_compare_traced(client, calls, [rng.normal(size=(3, 4)).astype(np.float32),
                                                            rng.normal(size=(5,)).astype(np.float32)])
    assert [n.op for n in graph_def.node].count("PartitionedCall") == 3


def test_each_function_is_lowered_once_per_signature():
    graph_def, feeds, fetches = traced_graph(calls, [np.zeros((3, 4), np.float32), np.zeros((5,), np.float32)])
    graph = import_graph(graph_def.SerializeToString(), Settings())
    graph = graph.replace(feeds=[Endpoint.parse(f) for f in feeds], fetches=[Endpoint.parse(f) for f in fetches])
    lowerer = Lowerer(graph, "cpu")

    def program(x, y):
        env = dict(zip(graph.feeds, [x, y]))
        lowerer.run(graph.topological_order(), env)
        return [env[f] for f in graph.fetches]

    jax.make_jaxpr(program)(jax.ShapeDtypeStruct((3, 4), np.float32), jax.ShapeDtypeStruct((5,), np.float32))
    assert len(lowerer.traces) == 2


def switch_case(x, k):
    return tf.switch_case(k, [lambda: x + 1.0, lambda: tf.exp(x), lambda: x * -2.0])


@pytest.mark.parametrize("k", [0, 2, 9, -3])
def test_case(client, k):
    graph_def = compile_and_compare_traced(client, switch_case, [rng.normal(size=(4,)).astype(np.float32), np.int32(k)])
    assert any(n.op in ("Case", "StatelessCase") for n in graph_def.node)


def constant_predicates(x, flag):
    """A cond on a constant picks its branch at compile time; one whose branches return the same
    constant returns that constant: both results may feed a Reshape."""
    picked = tf.cond(tf.constant(True), lambda: tf.constant([4, 3]), lambda: tf.constant([2, 6]))
    same = tf.cond(flag > 0, lambda: tf.reverse(tf.shape(x), [0]), lambda: tf.constant([4, 3]))
    return tf.reshape(x, picked) + tf.reshape(x, same) * tf.cast(flag, tf.float32)


@pytest.mark.parametrize("flag", [1, -1])
def test_constant_predicates_keep_results_static(client, flag):
    compile_and_compare_traced(client, constant_predicates, [rng.normal(size=(3, 4)).astype(np.float32),
                                                             np.int32(flag)])


def growing(x):
    return tf.while_loop(lambda a: tf.size(a) < 8, lambda a: [tf.concat([a, a], 0)], [x],
                         shape_invariants=[tf.TensorShape([None])])[0]


def test_loop_variable_changing_shape_is_unimplemented_naming_the_node(client):
    """TF runs the loop (its shape invariant allows it); XLA loops keep shapes: xlacs' limit."""
    graph_def, feeds, fetches = traced_graph(growing, [np.zeros((2,), np.float32)])
    with pytest.raises(grpc.RpcError) as e:
        client.compile(graph_def, feeds, fetches)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "node 'while'" in e.value.details() and "is float32[2] before the body" in e.value.details()


@tf.function
def cudnn_variant(x, h, c, params):
    return tf.raw_ops.CudnnRNNV3(input=x, input_h=h, input_c=c, params=params, sequence_lengths=[2],
                                 rnn_mode="lstm")[0]


def with_cudnn_function(graph_def, call: bool):
    """The graph with a cuDNN LSTM function in its library (as Keras 2 put one beside the generic LSTM),
    called by a PartitionedCall node when `call`."""
    specs = [tf.TensorSpec([2, 1, 3]), tf.TensorSpec([1, 1, 4]), tf.TensorSpec([1, 1, 4]), tf.TensorSpec([128])]
    function = cudnn_variant.get_concrete_function(*specs).function_def
    graph_def.library.function.add().CopyFrom(function)
    if call:
        node = graph_def.node.add(name="cudnn_call", op="PartitionedCall", input=["x"] * 4)
        node.attr["f"].func.name = function.signature.name
        node.attr["Tin"].list.type.extend([tf.float32.as_datatype_enum] * 4)
        node.attr["Tout"].list.type.extend([tf.float32.as_datatype_enum])
    return graph_def


def test_unreached_library_function_does_not_matter(client):
    x = rng.normal(size=(3,)).astype(np.float32)
    graph_def, feeds, fetches = traced_graph(lambda x: x * 2.0, [x])
    graph_def = with_cudnn_function(graph_def, call=False)
    got, = client.compile(graph_def, feeds, fetches).execute({"x:0": x})
    assert_close(got, x * 2.0)
    assert not client.check(graph_def.SerializeToString()).unsupported


def test_unsupported_op_in_a_called_function_is_unimplemented(client):
    graph_def, feeds, _ = traced_graph(lambda x: x * 2.0, [np.zeros((3,), np.float32)])
    graph_def = with_cudnn_function(graph_def, call=True)
    with pytest.raises(grpc.RpcError) as e:
        client.compile(graph_def, feeds, ["cudnn_call:0"])
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED and "CudnnRNNV3" in e.value.details()
    unsupported = client.check(graph_def.SerializeToString()).unsupported
    assert [u.op for u in unsupported] == ["CudnnRNNV3"] and unsupported[0].nodes[0].startswith("__inference_cudnn")


def test_check_counts_tf1_control_flow_as_supported(client):
    """Switch, Merge, Enter, Exit, NextIteration and LoopCond have no lowerings; FunctionalizeControlFlow
    removes them, so `xlacs check` must not report them."""
    frozen = freeze(tf.function(lambda x: tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 2.0), (0, x))[1]),
                    tf.TensorSpec([3]), lower_control_flow=True)
    report = client.check(frozen.graph_def)
    assert {"Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond"} <= set(report.op_histogram)
    assert not report.unsupported


def run_unfrozen(client, fn, args):
    """Compiles the unfrozen graph of tf.function `fn` (variables as inputs), runs it on args and the
    variables' current values; returns the outputs and the assigned variables' new values, by name."""
    data, feeds, fetches, variables = unfrozen(fn, *specs_of(args))
    declared = {name: spec for name, (spec, _) in variables.items()}
    executable = client.compile(data, {**dict(zip(feeds, [(a.dtype, a.shape) for a in args])), **declared}, fetches)
    values = {"variables/" + name.rsplit(":", 1)[0]: var.numpy() for name, (_, var) in variables.items()}
    outputs = executable.execute({**dict(zip(feeds, args)), **values})
    return outputs[:len(fetches)], dict(zip(executable.output_names[len(fetches):], outputs[len(fetches):])), \
        {"variables/" + name.rsplit(":", 1)[0]: var for name, (_, var) in variables.items()}


def test_unfrozen_keras_lstm_reads_its_variables_in_the_loop(client):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(4)])
    x = rng.normal(size=(2, 5, 3)).astype(np.float32)
    (got,), assigned, _ = run_unfrozen(client, tf.function(lambda t: model(t)), [x])
    assert_close(got, model(x).numpy())
    assert not assigned


def test_variables_assigned_in_loops_and_branches_come_back(client):
    total = tf.Variable(np.zeros((3,), np.float32))
    steps = tf.Variable(np.int32(0))

    @tf.function
    def accumulate(x):
        def body(i, acc):
            total.assign_add(acc)
            tf.cond(tf.reduce_sum(acc) > 0, lambda: steps.assign_add(1), lambda: steps.assign_sub(1))
            return i + 1, acc * 0.5
        tf.while_loop(lambda i, acc: i < 4, body, (0, x))
        return total.read_value() * 2.0

    x = rng.normal(size=(3,)).astype(np.float32)
    (got,), assigned, variables = run_unfrozen(client, accumulate, [x])
    want = accumulate(tf.constant(x)).numpy()  # updates the variables in TF
    assert_close(got, want)
    assert sorted(assigned) == sorted(variables)
    for name, value in assigned.items():
        assert_close(value, variables[name].numpy())


def test_tf1_defun_calls_by_op_name(client):
    """TF1's Defun calls a function through a node whose op is the function's name, in the graph, in a
    TF1 loop and in function bodies (where `node:output:0` names the called function's output)."""
    graph = tf.Graph()
    with tf1.control_flow_v1(), graph.as_default():
        @tf_function.Defun(tf.float32, tf.float32)
        def affine(a, b):
            return a * b + 1.0, a - b

        @tf_function.Defun(tf.float32)
        def twice(a):
            product, difference = affine(a, a + 1.0)
            return product * 2.0 + difference
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        looped = tf.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, tf.ensure_shape(twice(a), [3]) * 0.1),
                               (0, x))[1]
        tf.identity(twice(x) + looped, name="y")
    assert any(n.op.startswith("twice") for n in graph.as_graph_def().node)
    assert not client.check(graph.as_graph_def().SerializeToString()).unsupported
    x = rng.normal(size=(3,)).astype(np.float32)
    got, = client.compile(graph.as_graph_def(), {"x:0": (np.float32, (3,))}, ["y:0"]).execute({"x:0": x})
    assert_close(got, tf1.run(graph, {"x:0": x}, "y:0"))


TRUTH_DTYPES = [np.int32, np.uint8, np.float32, np.float64, np.bool_]
XLA_TRUTH_DTYPES = [np.float16, ml_dtypes.bfloat16, np.uint16, np.complex64]  # TF's CPU kernel refuses them


@pytest.mark.parametrize("dtype", TRUTH_DTYPES + XLA_TRUTH_DTYPES, ids=ids)
def test_to_bool(client, dtype):
    """TF's truth of a tensor: a scalar is true when nonzero (NaN included), any other tensor when it holds an
    element, whatever its values. TF's CPU kernel refuses float16 ("half cannot be converted to a boolean"),
    bfloat16, uint16 and complex; tf2xla takes every type, and is their oracle."""
    values = [np.zeros((), dtype), np.ones((), dtype), np.zeros((0, 3), dtype), np.zeros((2,), dtype)]
    if np.dtype(dtype).kind in "fc" or dtype == ml_dtypes.bfloat16:
        values += [np.array(np.nan, dtype), np.array(-0.0, dtype)]

    def fn(*xs):
        return [tf.raw_ops.ToBool(input=x) for x in xs]
    compile_and_compare(client, fn, values, oracle=tf.function(fn, jit_compile=True) if dtype in XLA_TRUTH_DTYPES
                        else None)


def cond_on(predicate, x):
    return tf.cond(tf.raw_ops.ToBool(input=predicate), lambda: x * 2.0, lambda: x - 1.0)


@pytest.mark.parametrize("lower_control_flow", [True, False], ids=["lowered", "functional"])
@pytest.mark.parametrize("predicate", [np.int32(0), np.int32(3), np.float32(-0.5), np.zeros((0,), np.float32),
                                       np.zeros((2,), np.float32)], ids=["0", "3", "-0.5", "empty", "[0, 0]"])
def test_cond_on_a_non_boolean_predicate(client, predicate, lower_control_flow):
    """A conditional on a number or a tensor: its predicate goes through ToBool (TF's Switch and TF2's tf.cond
    take only booleans), in Switch/Merge and in If form."""
    compile_and_compare(client, cond_on, [predicate, rng.normal(size=(3,)).astype(np.float32)],
                        lower_control_flow=lower_control_flow)
