"""The engines xlacs is measured against. Each runs in its own process (benchmarks/peers/worker.py), started by
the benchmark and fed the same frozen GraphDef and inputs (benchmarks/peers/files.py); the benchmark drives them
from benchmarks/peers/remote.py. A peer is a module with a `build(graph: GraphFiles) -> Call` that imports its
engine at its top: adding one is a module plus a line in BUILDERS, and naming the peers imports no engine."""
from __future__ import annotations

from typing import Callable

import numpy as np

# numpy arrays in feed order -> numpy arrays in fetch order.
Call = Callable[..., list[np.ndarray]]


def largest_error(outputs, reference) -> float:
    """The largest absolute difference of any output from its reference, relative to the reference's scale."""
    return max(float(np.abs(np.asarray(a, np.float64) - b).max() / max(np.abs(b).max(), 1e-30))
               for a, b in zip(outputs, reference, strict=True))


XLACS = "xlacs"  # not a peer process: the benchmark calls the daemon over loopback gRPC
# Not a peer process either: the executable the daemon compiled, downloaded into the benchmark's process and run
# there (Executable.local, issue 17), on the small models.
XLACS_LOCAL = "xlacs, run local"
TF_GRAPH, TF_XLA, TF2JAX = "TF graph mode", "TF XLA", "tf2jax"
OPENVINO, ONNX_RUNTIME = "OpenVINO", "ONNX Runtime"
IN_PROCESS, IN_PROCESS_EMBEDDED = "in-process JAX", "in-process JAX, weights embedded"
RUNTIMES = (OPENVINO, ONNX_RUNTIME)  # the CPU inference runtimes of issue 15's goals

# Peer -> "module:function" building it, in the order of the report's columns.
BUILDERS = {
    TF_GRAPH: "benchmarks.peers.tf_graph:build",
    TF_XLA: "benchmarks.peers.tf_xla:build",
    TF2JAX: "benchmarks.peers.tf2jax_jit:build",
    OPENVINO: "benchmarks.peers.openvino_cpu:build",
    ONNX_RUNTIME: "benchmarks.peers.onnxruntime_cpu:build",
    IN_PROCESS: "benchmarks.peers.xlacs_program:build_lifted",
    IN_PROCESS_EMBEDDED: "benchmarks.peers.xlacs_program:build_embedded",
}
PEERS = (XLACS, XLACS_LOCAL, *BUILDERS)
# Peers that run only some models: what weight lifting costs is measured on the models of the execute goals.
ONLY_FOR = {IN_PROCESS_EMBEDDED: ("MobileNetV2", "ResNet50")}


class PeerFailed(Exception):
    """A peer could not build or run the graph; the message says why, and goes into the report."""


def runs(peer: str, model: str) -> bool:
    return model in ONLY_FOR.get(peer, (model,))
