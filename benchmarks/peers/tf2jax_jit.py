"""tf2jax: the pruned GraphDef converted to a JAX function and `jax.jit`, what a user of tf2jax runs. tf2jax is
installed by scripts/bench (with --no-deps, see pyproject.toml), not by the tests."""
from __future__ import annotations

import jax
import numpy as np
import tensorflow as tf
import tf2jax

from benchmarks.peers import Call
from benchmarks.peers.files import GraphFiles
from benchmarks.peers.tf_graph import pruned_function


def build(graph: GraphFiles) -> Call:
    pruned = pruned_function(graph)
    feeds, _ = graph.signature()
    examples = [np.zeros(shape, dtype) for dtype, shape in feeds.values()]
    function, params = tf2jax.convert(tf.function(lambda *args: pruned(*args)), *examples)
    jitted = jax.jit(function)

    def call(*arrays):
        outputs, _ = jitted(params, *arrays)  # the outputs, and the parameters (TF variables) after the call
        return [np.asarray(r) for r in (outputs if isinstance(outputs, (list, tuple)) else [outputs])]
    return call
