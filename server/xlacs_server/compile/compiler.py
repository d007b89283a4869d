"""Traces the lowered program with jax.jit into StableHLO and compiles it with PJRT for one device."""
from __future__ import annotations

import dataclasses
import time
from typing import Callable

import jax
import numpy as np

from xlacs_server.compile import xla_options
from xlacs_server.execute.devices import DeviceRef
from xlacs_server.execute.program import Program
from xlacs_server.graph.ir import Graph
from xlacs_server.lower.engine import argument_specs, build_program
from xlacs_server.tensor_sig import TensorSig
from xlacs_server.unit.variables import INPUT_PREFIX as VARIABLE_PREFIX
from xlacs_server.unit.weights import weight_values


@dataclasses.dataclass
class CompiledProgram:
    compiled: Program
    stablehlo: str
    outputs: list[TensorSig]
    params: list[TensorSig]
    lower_ms: float
    compile_ms: float
    serialized: bytes  # the PJRT executable, as the backend serializes it (native code)


def param_sigs(graph: Graph) -> list[TensorSig]:
    return [TensorSig(str(e), v.dtype, v.shape) for e, v in zip(graph.params, weight_values(graph))]


def compile_graph(graph: Graph, device: DeviceRef, checkpoint: Callable[[str], None],
                  options: dict[str, xla_options.Value]) -> CompiledProgram:
    """Compiles the graph as a function of its feeds, variables and lifted weights (engine.argument_specs),
    with XLA debug `options` (compile/xla_options.py); it returns the fetches, then the variables it assigned.
    `checkpoint("compile")` runs between the lowering and the XLA compile, which nothing interrupts."""
    sharding = jax.sharding.SingleDeviceSharding(device.device)
    params = param_sigs(graph)
    specs = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding) for s in argument_specs(graph)]
    start = time.perf_counter()
    program_fn = build_program(graph, graph.platform)
    # keep_unused: the executable takes every argument, so a loaded one is called like a fresh one.
    lowered = jax.jit(program_fn, keep_unused=True).lower(*specs)
    stablehlo = lowered.as_text()
    lowered_at = time.perf_counter()
    checkpoint("compile")
    compiled = lowered.compile(compiler_options=options)
    done = time.perf_counter()
    names = [str(f) for f in graph.fetches] + [VARIABLE_PREFIX + name for name in program_fn.assigned]
    outputs = [TensorSig(n, np.dtype(o.dtype), tuple(o.shape)) for n, o in zip(names, compiled.out_info)]
    program = Program(compiled.runtime_executable())
    return CompiledProgram(program, stablehlo, outputs, params, (lowered_at - start) * 1e3,
                           (done - lowered_at) * 1e3, program.serialize())
