"""The peers xlacs is measured against, each built from the same frozen GraphDef and called the same way:
numpy arrays in, numpy arrays out. A peer that cannot build a graph reports why instead of a number."""
from __future__ import annotations

import time
from typing import Callable

import jax
import numpy as np
import tensorflow as tf

from benchmarks.models import Model
from xlacs import dtypes
from xlacs_server import unit
from xlacs_server.compile.compiler import compile_graph
from xlacs_server.passes.registry import run_pipeline
from xlacs_server.service import CompilationService, CompileSpec, no_checkpoint
from xlacs_server.unit.weights import weight_values

Call = Callable[..., list[np.ndarray]]
# Each first-call measurement builds a new jit_compile function on purpose; TF warns of the retracing.
tf.get_logger().setLevel("ERROR")

try:
    import tf2jax
except ImportError as e:  # the bench extra installs it (scripts/bench); the tests do not need it
    tf2jax, TF2JAX_MISSING = None, f"tf2jax is not installed ({e}): scripts/bench installs it"
else:
    TF2JAX_MISSING = ""


class PeerFailed(Exception):
    """A peer could not build or run the graph; the message says why, and goes into the report."""


def compile_spec(model: Model, name: str = "") -> CompileSpec:
    feeds = [(n, dtypes.from_numpy(np.dtype(d)), tuple(s)) for n, (d, s) in model.frozen.feeds.items()]
    return CompileSpec(model.frozen.graph_def, feeds, list(model.frozen.fetches), graph_name=name or model.name)


def tf_graph_function(model: Model):
    """The frozen GraphDef imported into TensorFlow and pruned to its feeds and fetches: TF graph mode."""
    graph_def = tf.compat.v1.GraphDef.FromString(model.frozen.graph_def)
    wrapped = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(graph_def, name=""), [])
    return wrapped.prune(list(model.frozen.feeds), list(model.frozen.fetches))


def _numpy_outputs(results) -> list[np.ndarray]:
    return [np.asarray(r) for r in (results if isinstance(results, (list, tuple)) else [results])]


def tf_graph(pruned) -> Call:
    """A pruned function takes tensors only (a tf.function would convert numpy arrays the same way)."""
    return lambda *arrays: [t.numpy() for t in pruned(*map(tf.convert_to_tensor, arrays))]


def tf_xla(pruned) -> Call:
    """A new jit_compile function each time, so that its first call compiles (TF caches per function)."""
    function = tf.function(lambda *args: pruned(*args), jit_compile=True)
    return lambda *arrays: [t.numpy() for t in function(*arrays)]


def tf2jax_jit(pruned, model: Model) -> Call:
    """tf2jax.convert of the pruned graph, then jax.jit: what a user of tf2jax runs in their own process."""
    if tf2jax is None:
        raise PeerFailed(TF2JAX_MISSING)
    examples = [np.zeros(s, d) for d, s in model.frozen.feeds.values()]
    try:
        function, params = tf2jax.convert(tf.function(lambda *args: pruned(*args)), *examples)
    except Exception as e:  # tf2jax raises plain exceptions for unsupported ops; the report names them
        raise PeerFailed(f"tf2jax.convert: {type(e).__name__}: {str(e).splitlines()[0][:300]}") from None
    jitted = jax.jit(function)
    return lambda *arrays: _numpy_outputs(jitted(params, *arrays))


def in_process_jax(service: CompilationService, model: Model) -> Call:
    """The program xlacs compiles for this graph (same passes, lowering and PJRT options), called in this
    process the way the server's Execute calls it: the service overhead is xlacs against this."""
    spec = compile_spec(model)
    device = service.devices.resolve("")
    graph = unit.build(spec.graph_def, spec.feeds, spec.fetches, service.settings, device.platform).graph
    graph, _ = run_pipeline(graph)
    program = compile_graph(graph, device, no_checkpoint).compiled
    weights = [jax.device_put(v, device.device) for v in weight_values(graph)]

    def call(*arrays):
        return [np.asarray(out) for out in program(*jax.device_put(list(arrays), device.device), *weights)]
    return call


def first_call_ms(build: Callable[[], Call], inputs: list[np.ndarray]) -> tuple[float, Call, list[np.ndarray]]:
    """(ms to build the peer and get its first result, the peer, that result); PeerFailed when it cannot."""
    start = time.perf_counter()
    try:
        call = build()
        outputs = call(*inputs)
    except PeerFailed:
        raise
    except Exception as e:  # TF and JAX raise many types for graphs they cannot compile; the report says which
        raise PeerFailed(f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}") from None
    return (time.perf_counter() - start) * 1e3, call, outputs


def max_relative_error(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    """Largest |got - want| over the largest |want| (at least 1): the same program should give ~1e-6."""
    errors = [float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) /
              max(1.0, float(np.max(np.abs(w)))) for g, w in zip(got, want)]
    return max(errors, default=0.0)
