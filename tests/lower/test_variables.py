"""Unfrozen graphs: variables are executable inputs supplied at Execute; assigned values come back."""
import grpc
import numpy as np
import pytest
import tensorflow as tf


def unfrozen(fn, *specs):
    """The tf.function's graph as is (variables captured as resource placeholders): the graph, its feeds,
    its fetches, and the variables' feeds {placeholder:0: (dtype, shape)} with the variable objects."""
    concrete = fn.get_concrete_function(*specs)
    feeds = [t.name for t in concrete.inputs if t.dtype != tf.resource]
    captured = {id(handle): var for var in concrete.variables for handle in [var.handle]}
    variables = {}
    for external, internal in concrete.graph.captures:
        var = captured.get(id(external))
        if var is not None:
            variables[internal.name] = ((var.dtype.as_numpy_dtype, tuple(var.shape)), var)
    return concrete.graph.as_graph_def().SerializeToString(), feeds, [t.name for t in concrete.outputs], variables


def test_tf2_captured_variables_are_inputs_and_updates_come_back(client):
    kernel = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2), name="kernel")
    counter = tf.Variable(np.zeros((2,), np.float32), name="counter")
    table = tf.Variable(np.arange(20, dtype=np.float32).reshape(5, 4), name="table")

    @tf.function
    def step(x, ids):
        y = tf.matmul(x, kernel) + tf.gather(table, ids)[:, :2]
        counter.assign_add(tf.reduce_sum(y, axis=0))
        return y

    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    ids = np.array([0, 3, 1, 4], np.int32)
    data, feeds, fetches, variables = unfrozen(step, tf.TensorSpec([4, 3], tf.float32), tf.TensorSpec([4], tf.int32))
    assert len(variables) == 3
    declared = {name: spec for name, (spec, _) in variables.items()}
    executable = client.compile(data, {feeds[0]: (np.float32, (4, 3)), feeds[1]: (np.int32, (4,)), **declared},
                                fetches)
    assert executable.input_names[:2] == feeds
    values = {"variables/" + name.rsplit(":", 1)[0]: var.numpy() for name, (_, var) in variables.items()}
    assert sorted(executable.input_names[2:]) == sorted(values)
    outputs = executable.execute({feeds[0]: x, feeds[1]: ids, **values})
    want_y = step(x, ids).numpy()  # also updates `counter` in TF
    np.testing.assert_allclose(outputs[0], want_y, rtol=1e-6)
    assert executable.output_names[1].startswith("variables/")
    np.testing.assert_allclose(outputs[1], counter.numpy(), rtol=1e-6)

    with pytest.raises(grpc.RpcError) as e:
        executable.execute({feeds[0]: x, feeds[1]: ids})
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "variables/" in e.value.details()


def test_tf1_var_handle_ops(client):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (2, 2), name="x")
        w = tf.compat.v1.get_variable("w", shape=(2, 2), dtype=tf.float32, use_resource=True)
        y = tf.identity(tf.matmul(x, w.read_value()), name="y")
        with tf.control_dependencies([y]):
            tf.identity(w.assign_sub(tf.ones((2, 2))), name="stepped")
    executable = client.compile(g.as_graph_def().SerializeToString(), {"x:0": ("float32", (2, 2))},
                                ["y:0", "stepped:0"])
    assert executable.input_names == ["x:0", "variables/w"]
    assert executable.output_names == ["y:0", "stepped:0", "variables/w"]
    w_value = np.array([[1, 2], [3, 4]], np.float32)
    y_out, stepped, w_after = executable.execute({"x:0": np.eye(2, dtype=np.float32), "variables/w": w_value})
    np.testing.assert_allclose(y_out, w_value)
    np.testing.assert_allclose(stepped, w_value - 1)
    np.testing.assert_allclose(w_after, w_value - 1)


def test_undeclared_captured_variable_is_a_clear_error(client):
    v = tf.Variable(np.ones((2,), np.float32))

    @tf.function
    def fn(x):
        return x * v

    data, feeds, fetches, variables = unfrozen(fn, tf.TensorSpec([2], tf.float32))
    with pytest.raises(grpc.RpcError) as e:
        client.compile(data, {feeds[0]: (np.float32, (2,))}, fetches)
    (placeholder,) = variables
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and placeholder in e.value.details()
