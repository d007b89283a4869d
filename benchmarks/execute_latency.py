"""Execute latency, p50 and p99, of every peer on the same frozen graph and input, timed interleaved: xlacs
over loopback gRPC from this process, and each peer in its own process (benchmarks/peers), one at a time.
Every peer's outputs are checked against TF graph mode's."""
from __future__ import annotations

import functools

import numpy as np

from benchmarks.models import Model
from benchmarks.peers import TF_GRAPH, XLACS, XLACS_LOCAL, PeerFailed
from benchmarks.peers.remote import PeerProcesses
from benchmarks.timing import interleaved_turns, local


def max_relative_error(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    """Largest |got - want| over the largest |want| (at least 1): the same program should give ~1e-6."""
    errors = [float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) /
              max(1.0, float(np.max(np.abs(w)))) for g, w in zip(got, want, strict=True)]
    return max(errors, default=0.0)


def measure_model(client, peers: PeerProcesses, model: Model, seconds: float) -> dict:
    """The peers reuse their last build of the model (the compile step's) or build it now."""
    graph = peers.graph(model)
    errors, running = {}, {}
    for name, peer in peers.for_model(model).items():
        try:
            peer.ready(graph)
            running[name] = peer
        except PeerFailed as e:
            errors[name] = str(e)
    if TF_GRAPH not in running:
        raise RuntimeError(f"{model.name}: TF graph mode, the reference, failed: {errors[TF_GRAPH]}")
    executable = model.compile(client)
    reference = running[TF_GRAPH].outputs(graph)
    error_vs_tf = {XLACS: max_relative_error(executable(*model.inputs), reference)}
    for name, peer in running.items():
        try:
            error_vs_tf[name] = max_relative_error(peer.outputs(graph), reference)
        except PeerFailed as e:
            errors[name] = str(e)
    turns = {XLACS: local(lambda: executable(*model.inputs))}
    if model.small:  # compile remote, run local: downloaded once, then called in this process
        here = executable.local()
        if here.runs == "local":
            error_vs_tf[XLACS_LOCAL] = max_relative_error(here(*model.inputs), reference)
            turns[XLACS_LOCAL] = local(lambda: here(*model.inputs))
        else:
            errors[XLACS_LOCAL] = here.reason
    turns.update({name: functools.partial(peer.turn, graph) for name, peer in running.items() if name in error_vs_tf})
    samples = interleaved_turns(turns, seconds)
    return {"peers": {name: s.summary() for name, s in samples.items()}, "errors": errors,
            "max_relative_error_vs_tf_graph": error_vs_tf}


def measure(client, peers: PeerProcesses, models: list[Model], seconds: float) -> dict:
    return {model.name: measure_model(client, peers, model, seconds) for model in models}
