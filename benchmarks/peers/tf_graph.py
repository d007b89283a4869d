"""TF graph mode: the frozen GraphDef imported into TensorFlow and pruned to its feeds and fetches."""
from __future__ import annotations

import tensorflow as tf

from benchmarks.peers import Call
from benchmarks.peers.files import GraphFiles


def pruned_function(graph: GraphFiles):
    """The GraphDef as a TF function of its feeds returning its fetches (TF prunes what they do not reach)."""
    feeds, fetches = graph.signature()
    graph_def = tf.compat.v1.GraphDef.FromString(graph.graph_def)
    wrapped = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(graph_def, name=""), [])
    return wrapped.prune(list(feeds), fetches)


def build(graph: GraphFiles) -> Call:
    """A pruned function takes tensors only (a tf.function would convert numpy arrays the same way)."""
    pruned = pruned_function(graph)
    return lambda *arrays: [t.numpy() for t in pruned(*map(tf.convert_to_tensor, arrays))]
