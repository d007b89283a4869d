"""Function calls are inlined: the graph after the pass has no calls left and still matches TF."""
import numpy as np
import tensorflow as tf

import xlacs_server.service  # noqa: F401  (registers passes and lowerings)
from xlacs_server.config import Settings
from xlacs_server.graph.importer import import_graph
from xlacs_server.graph.ir import Endpoint
from xlacs_server.passes.inline import inline_calls


@tf.function
def inner(x):
    return tf.nn.relu(x) * 2.0


@tf.function
def middle(x):
    return inner(x) - inner(-x)


@tf.function
def outer(x):
    return tf.identity(middle(x) + 1.0, name="out")


def graph_def() -> bytes:
    return outer.get_concrete_function(tf.TensorSpec([3], tf.float32)).graph.as_graph_def().SerializeToString()


def test_nested_calls_are_inlined():
    graph = import_graph(graph_def(), Settings())
    assert any(n.op.endswith("PartitionedCall") for n in graph.nodes.values())
    graph = graph.replace(feeds=[Endpoint("x", 0)], fetches=[Endpoint("out", 0)])
    inlined = inline_calls(graph)
    assert not any(n.op.endswith("PartitionedCall") for n in inlined.nodes.values())


def test_inlined_graph_matches_tf(client):
    executable = client.compile(graph_def(), {"x:0": ("float32", (3,))}, ["out:0"], name="inline")
    assert not any(p.name == "inline_calls" and p.nodes_after > p.nodes_before * 100 for p in executable.passes)
    x = np.array([-1.5, 0.0, 2.0], np.float32)
    np.testing.assert_allclose(executable(x)[0], outer(x).numpy())
