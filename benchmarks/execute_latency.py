"""Execute latency, p50 and p99, of every peer on the same frozen graph and input, timed interleaved: xlacs
over loopback gRPC, in-process JAX on the program xlacs compiled (and, for the models of the execute goals,
on the program compiled without weight lifting), TF graph mode, TF XLA and tf2jax."""
from __future__ import annotations

import dataclasses

from benchmarks import peers
from benchmarks.models import Model
from benchmarks.timing import interleaved
from xlacs_server.service import CompilationService

XLACS, IN_PROCESS, TF_GRAPH, TF_XLA, TF2JAX = "xlacs", "in-process JAX", "TF graph mode", "TF XLA", "tf2jax"
IN_PROCESS_EMBEDDED = "in-process JAX, weights embedded"
PEERS = (XLACS, IN_PROCESS, TF_GRAPH, TF_XLA, TF2JAX, IN_PROCESS_EMBEDDED)
# The models of the execute goals also run with weight lifting off: what lifting costs the program.
EMBEDDED_FOR = ("MobileNetV2", "ResNet50")


def _calls(client, service: CompilationService, model: Model, built: dict, errors: dict) -> dict:
    """Each peer's call, or its error in `errors`; TF XLA and tf2jax reuse those the compile step built."""
    pruned = peers.tf_graph_function(model)
    builders = {
        XLACS: lambda: model.compile(client),
        IN_PROCESS: lambda: peers.in_process_jax(service, model),
        TF_GRAPH: lambda: peers.tf_graph(pruned),
        TF_XLA: lambda: built.get("tf_xla_first_ms") or peers.tf_xla(pruned),
        TF2JAX: lambda: built.get("tf2jax_first_ms") or peers.tf2jax_jit(pruned, model),
    }
    if model.name in EMBEDDED_FOR:
        builders[IN_PROCESS_EMBEDDED] = lambda: peers.in_process_jax(
            CompilationService(dataclasses.replace(service.settings, lift_threshold_bytes=0)), model)
    calls = {}
    for name, build in builders.items():
        try:
            _, calls[name], _ = peers.first_call_ms(build, model.inputs)
        except peers.PeerFailed as e:
            errors[name] = str(e)
    return calls


def measure_model(client, service: CompilationService, model: Model, built: dict, seconds: float) -> dict:
    errors = {}
    calls = _calls(client, service, model, built, errors)
    if TF_GRAPH not in calls:
        raise RuntimeError(f"{model.name}: TF graph mode, the reference, failed: {errors[TF_GRAPH]}")
    reference = calls[TF_GRAPH](*model.inputs)
    error_vs_tf = {name: peers.max_relative_error(call(*model.inputs), reference) for name, call in calls.items()}
    samples = interleaved({name: (lambda c=call: c(*model.inputs)) for name, call in calls.items()}, seconds)
    return {"peers": {name: s.summary() for name, s in samples.items()}, "errors": errors,
            "max_relative_error_vs_tf_graph": error_vs_tf}


def measure(client, service: CompilationService, models: list[Model], built: dict, seconds: float) -> dict:
    return {model.name: measure_model(client, service, model, built.get(model.name, {}), seconds)
            for model in models}
