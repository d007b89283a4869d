"""TF XLA: the pruned GraphDef in a `tf.function(jit_compile=True)`, TensorFlow's own XLA."""
from __future__ import annotations

import tensorflow as tf

from benchmarks.peers import Call
from benchmarks.peers.files import GraphFiles
from benchmarks.peers.tf_graph import pruned_function

# Each first-call measurement builds a new jit_compile function on purpose; TF warns of the retracing.
tf.get_logger().setLevel("ERROR")


def build(graph: GraphFiles) -> Call:
    """A new jit_compile function each time, so that its first call compiles (TF caches per function)."""
    pruned = pruned_function(graph)
    function = tf.function(lambda *args: pruned(*args), jit_compile=True)
    return lambda *arrays: [t.numpy() for t in function(*arrays)]
