"""Traces the lowered program with jax.jit into StableHLO and compiles it with PJRT for one device."""
from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from xlacs_server.compile.weights import weight_values
from xlacs_server.execute.devices import DeviceRef
from xlacs_server.graph.ir import Graph
from xlacs_server.lower.engine import build_program


@dataclasses.dataclass(frozen=True)
class TensorSig:
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.dtype}{list(self.shape)}"


@dataclasses.dataclass
class CompiledProgram:
    compiled: object  # jax.stages.Compiled
    stablehlo: str
    outputs: list[TensorSig]
    params: list[TensorSig]
    lower_ms: float
    compile_ms: float
    serialized: bytes  # the PJRT executable, as the backend serializes it (native code)


def param_sigs(graph: Graph) -> list[TensorSig]:
    return [TensorSig(str(e), v.dtype, v.shape) for e, v in zip(graph.params, weight_values(graph))]


def compile_graph(graph: Graph, inputs: list[TensorSig], device: DeviceRef) -> CompiledProgram:
    """Compiles the graph as a function of its feeds (`inputs`) followed by its lifted weights."""
    sharding = jax.sharding.SingleDeviceSharding(device.device)
    params = param_sigs(graph)
    specs = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding) for s in [*inputs, *params]]
    start = time.perf_counter()
    lowered = jax.jit(build_program(graph, graph.platform)).lower(*specs)
    stablehlo = lowered.as_text()
    lowered_at = time.perf_counter()
    compiled = lowered.compile()
    done = time.perf_counter()
    outputs = [TensorSig(str(f), np.dtype(o.dtype), tuple(o.shape)) for f, o in zip(graph.fetches, compiled.out_info)]
    serialized = device.device.client.serialize_executable(compiled.runtime_executable())
    return CompiledProgram(compiled, stablehlo, outputs, params, (lowered_at - start) * 1e3,
                           (done - lowered_at) * 1e3, serialized)
