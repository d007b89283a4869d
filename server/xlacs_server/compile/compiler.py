"""Traces the lowered program with jax.jit into StableHLO and compiles it with PJRT for one device; a program
with a weight-only part is compiled as two, the prepare program and the per-call one (compile/prepare.py), at
the same time: XLA releases the GIL while it compiles, so the second compile hides behind the first. A tiered
compile (compile/tier_up.py) compiles the per-call program with quick options first, and leaves its optimizing
compile to be done later."""
from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from typing import Callable

import jax
import numpy as np
from jax._src import core

from xlacs_server.compile import prepare, xla_options
from xlacs_server.execute.devices import DeviceRef
from xlacs_server.execute.executable import Prepare
from xlacs_server.execute.program import Program
from xlacs_server.graph.ir import Graph
from xlacs_server.lower.engine import argument_specs, build_program
from xlacs_server.lower.variables import variable_name
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
    prepare: Prepare | None  # the weight-only part, if the graph has one
    # Of a tiered compile, whose `compiled` was compiled with quick_options: compiles the optimized program.
    optimize: Callable[[], Program] | None = None


def quick_options(options: dict[str, xla_options.Value]) -> dict[str, xla_options.Value]:
    """The daemon's options with LLVM's optimizations off and, where XLA still has them (jaxlib 0.10), XLA:CPU's
    older elemental emitters instead of its MLIR fusion emitters, which cost a fixed compile time per fusion. The prepare program compiles with them: it runs
    once per weight set, hundreds of small elementwise fusions over the weights, which the elemental emitters
    compile with 1.2-3.6x less CPU time on the Keras CNNs, to the same values, and it runs as fast. So does a tiered
    compile's first program: the CNNs' per-call programs compile in 0.33-0.52x the time and run 2-6x slower until
    the optimized one replaces them (docs/performance.md, Cold compile and Tiered compilation)."""
    return {**options, "xla_backend_optimization_level": 0, **xla_options.elemental_emitters()}


def param_sigs(graph: Graph) -> list[TensorSig]:
    return [TensorSig(str(e), v.dtype, v.shape) for e, v in zip(graph.params, weight_values(graph))]


def compile_graph(graph: Graph, device: DeviceRef, checkpoint: Callable[[str], None],
                  options: dict[str, xla_options.Value], tiered: Callable[[str], bool]) -> CompiledProgram:
    """Compiles the graph as a function of its feeds, variables and lifted weights (engine.argument_specs),
    with XLA debug `options` (compile/xla_options.py); it returns the fetches, then the variables it assigned.
    A weight-only part is split off into a prepare program (compile/prepare.py), compiled with quick_options on
    another thread while the per-call program compiles; compile_ms is the wall time of both compiles. When
    `tiered(stablehlo)` says so of the per-call program, it compiles with quick_options too, and the result's
    `optimize` compiles it with `options`. `checkpoint("compile")` runs between the lowering and the XLA compiles,
    which nothing interrupts."""
    sharding = jax.sharding.SingleDeviceSharding(device.device)
    params = param_sigs(graph)
    start = time.perf_counter()
    parts = prepare.split(graph)
    if parts is not None:
        lowered_prepare = _lower(parts.prepare, sharding)
        graph = parts.call.replace(prepared_specs=[(np.dtype(o.dtype), tuple(o.shape))
                                                   for o in lowered_prepare.out_info])
    program_fn = build_program(graph, graph.platform)
    lowered = _lower_donating(graph, sharding, program_fn) if graph.variables else _lower(graph, sharding, program_fn)
    stablehlo = lowered.as_text()
    lowered_at = time.perf_counter()
    checkpoint("compile")
    quick = tiered(stablehlo)
    options = xla_options.for_program(options, stablehlo)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="xlacs-prepare") as pool:
        pending = None if parts is None else pool.submit(_prepare, parts, params, lowered_prepare, options)
        compiled = lowered.compile(compiler_options=quick_options(options) if quick else options)
        prepare_part = None if pending is None else pending.result()
    done = time.perf_counter()
    names = [str(f) for f in graph.fetches] + [VARIABLE_PREFIX + name for name in program_fn.assigned]
    outputs = [TensorSig(n, np.dtype(o.dtype), tuple(o.shape)) for n, o in zip(names, compiled.out_info)]
    program = Program(compiled.runtime_executable())
    optimize = (lambda: Program(lowered.compile(compiler_options=options).runtime_executable())) if quick else None
    return CompiledProgram(program, stablehlo, outputs, params, (lowered_at - start) * 1e3,
                           (done - lowered_at) * 1e3, program.serialize(), prepare_part, optimize)


def _lower(graph: Graph, sharding, program_fn: Callable | None = None):
    """The graph's program traced by jax.jit for arguments on `sharding`."""
    specs = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding) for s in argument_specs(graph)]
    # keep_unused: the executable takes every argument, so a loaded one is called like a fresh one.
    return jax.jit(program_fn or build_program(graph, graph.platform), keep_unused=True).lower(*specs)


def _lower_donating(graph: Graph, sharding, program_fn: Callable):
    """The program traced, then lowered with the inputs of the variables it assigns donated: each is aliased to an
    output, so a step on a variable state (execute/states.py) updates the model in place instead of copying it.
    Which variables a program assigns is known only once it is traced, so it is traced once into a jaxpr, which is
    lowered with the donations; the ops' rules do not run twice."""
    specs = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding) for s in argument_specs(graph)]
    traced = jax.jit(program_fn, keep_unused=True).trace(*specs)
    assigned = set(program_fn.assigned)
    first = len(graph.feeds)  # the variables follow the feeds (engine.argument_specs)
    donated = tuple(first + i for i, e in enumerate(graph.variables)
                    if variable_name(graph.nodes[e.node]) in assigned)
    return jax.jit(core.jaxpr_as_fun(traced.jaxpr), donate_argnums=donated, keep_unused=True).lower(*specs)


def _prepare(parts: prepare.Split, params: list[TensorSig], lowered,
             options: dict[str, xla_options.Value]) -> Prepare:
    """The compiled prepare program of `parts`; it and the per-call program name the lifted weights by index."""
    index = {s.name: i for i, s in enumerate(params)}
    stablehlo = lowered.as_text()
    options = quick_options(xla_options.for_program(options, stablehlo))
    compiled = Program(lowered.compile(compiler_options=options).runtime_executable())
    outputs = [TensorSig(str(e), np.dtype(o.dtype), tuple(o.shape))
               for e, o in zip(parts.prepare.fetches, lowered.out_info)]
    return Prepare(compiled, [index[str(e)] for e in parts.prepare.params], [index[str(e)] for e in parts.call.params],
                   outputs, stablehlo, compiled.serialize())
