"""A node that leaves attrs at their OpDef's defaults, as TF writes a GraphDef with `strip_default_attrs=True`,
imports holding them, in the graph and in function bodies (as TF's AddDefaultAttrsToGraphDef fills them in): it
imports as the graph that spells them out, has its fingerprint and computes what TF computes."""
import numpy as np
import tensorflow as tf

from tests.oracle import assert_close, rand, strip_default_attrs
from xlacs_server.config import Settings
from xlacs_server.graph import op_defs
from xlacs_server.graph.function_def import to_graph
from xlacs_server.graph.importer import export_graph, import_graph

X_SHAPE, W_SHAPE = (1, 6, 6, 3), (3, 3, 3, 4)


def conv_batch_norm_call() -> tf.compat.v1.GraphDef:
    """x -> Conv2D -> FusedBatchNormV3 (inference) -> a library function (Conv2D, LeakyRelu) -> out, weights
    constant; TF writes every attr."""
    @tf.function
    def head(y, w):
        return tf.nn.leaky_relu(tf.nn.conv2d(y, w, 1, "SAME"))

    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, X_SHAPE, name="x")
        y = tf.nn.conv2d(x, tf.constant(rand(W_SHAPE)), 1, "SAME")
        channels = [tf.constant(rand((4,), low=0.5, high=1.5)) for _ in range(4)]
        y = tf.raw_ops.FusedBatchNormV3(x=y, scale=channels[0], offset=channels[1], mean=channels[2],
                                        variance=channels[3], is_training=False)[0]
        tf.identity(head(y, tf.constant(rand((3, 3, 4, 4)))), name="out")
    return g.as_graph_def()


def attrs_of(graph_def, op: str, function: bool = False) -> set[str]:
    node_defs = graph_def.library.function[0].node_def if function else graph_def.node
    return {name for nd in node_defs if nd.op == op for name in nd.attr}


def test_defaulted_attrs_are_filled_in_at_import_in_nodes_and_function_bodies():
    full = conv_batch_norm_call()
    stripped = strip_default_attrs(full)
    assert {"data_format", "dilations"}.isdisjoint(attrs_of(stripped, "Conv2D"))
    assert {"epsilon", "data_format", "exponential_avg_factor"}.isdisjoint(attrs_of(stripped, "FusedBatchNormV3"))
    assert {"data_format", "dilations"}.isdisjoint(attrs_of(stripped, "Conv2D", function=True))
    assert "alpha" not in attrs_of(stripped, "LeakyRelu", function=True)

    graph = import_graph(stripped.SerializeToString(), Settings())
    assert export_graph(graph) == export_graph(import_graph(full.SerializeToString(), Settings()))
    batch_norm, = (n for n in graph.nodes.values() if n.op == "FusedBatchNormV3")
    assert batch_norm.attrs["epsilon"] == np.float32(1e-4) and batch_norm.attrs["data_format"] == "NHWC"
    function, = graph.library.values()
    body = to_graph(function, {}, Settings.max_tensor_elements)
    for node in [*graph.nodes.values(), *body.nodes.values()]:
        assert set(op_defs.attr_defs(node.op)) <= set(node.attrs), node.name
    leaky_relu, = (n for n in body.nodes.values() if n.op == "LeakyRelu")
    assert leaky_relu.attrs["alpha"] == np.float32(0.2)


def test_a_graph_without_its_default_attrs_has_the_same_fingerprint_and_tfs_results(client):
    full = conv_batch_norm_call()
    feeds = {"x:0": (np.float32, X_SHAPE)}
    stripped = client.compile(strip_default_attrs(full).SerializeToString(), feeds, ["out:0"], name="stripped")
    assert stripped.id == client.compile(full.SerializeToString(), feeds, ["out:0"], name="full").id

    x = rand(X_SHAPE)
    run = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(full, name=""), [])
    want = run.prune(["x:0"], "out:0")(tf.constant(x))
    assert_close(stripped.execute({"x:0": x})[0], want.numpy())
