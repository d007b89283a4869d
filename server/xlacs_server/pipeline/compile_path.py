"""The compile path: a Compile's graph (sent, or put together by its digest) -> compile unit -> cache key -> the
tiers, or on a miss passes, lowering and the XLA compile -> bound to its weights on the device."""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import logging
import pathlib
import threading
import time
from typing import Callable

import numpy as np
from xlacs import dtypes

from xlacs_server import metrics
from xlacs_server import unit
from xlacs_server.cache.bindings import BindingRecords
from xlacs_server.cache.blobs import Blobs
from xlacs_server.cache.tiers import Hit, Tiers
from xlacs_server.compile import tier_up, xla_options
from xlacs_server.compile.cache_key import (CACHE_FORMAT_VERSION, cache_key, code_identity, compile_options_identity,
                                            device_identity, runtime_identity)
from xlacs_server.compile.compiler import compile_graph
from xlacs_server.compile.tier_up import TierUp
from xlacs_server.config import Settings
from xlacs_server.counters import Counters
from xlacs_server.digest import digest_of
from xlacs_server.execute.devices import DeviceRef, Devices
from xlacs_server.execute.executable import OPTIMIZED, QUICK, Executable, LoadedExecutable
from xlacs_server.execute.isolation import has_loops
from xlacs_server.execute.loaded import LoadedExecutables, MissingWeights
from xlacs_server.graph.fingerprint import fingerprint
from xlacs_server.graph.importer import graph_text, import_graph
from xlacs_server.graph.ir import Graph
from xlacs_server.lower import check
from xlacs_server.passes.registry import run_pipeline
from xlacs_server.pipeline import by_digest
from xlacs_server.pipeline.request import CompileResult, CompileSpec, Stopwatch, within_limits
from xlacs_server.tensor_sig import TensorSig
from xlacs_server.unit.weights import weight_values

log = logging.getLogger(__name__)


class CompilePath:
    def __init__(self, settings: Settings, devices: Devices, options: dict, tiers: Tiers, blobs: Blobs,
                 records: BindingRecords, executables: LoadedExecutables, tier_up: TierUp, counters: Counters):
        self.settings = settings
        self.devices = devices
        self.xla_options = options
        self.tiers = tiers
        self.blobs = blobs
        self.records = records
        self.executables = executables
        self.tier_up = tier_up
        self.counters = counters
        self._flights: dict[str, list] = {}  # key -> [lock, requests holding or awaiting it]
        self._flights_lock = threading.Lock()

    def compile(self, spec: CompileSpec, watch: Stopwatch) -> CompileResult:
        """The executable of `spec`, from a cache or compiled; only an XLA compile takes a `watch.slot()`. With
        `spec.wait_optimized`, the answer waits for a tiered compile's optimized program (compile/tier_up.py; the
        wait is the stage "tier_up")."""
        try:
            result = self._compile_spec(spec, watch)
            result.tier = result.loaded.executable.tier  # what it answers with: its tier-up starts below
        finally:
            watch.answered.set()
        if spec.wait_optimized:
            with watch.stage("tier_up"):
                self.tier_up.wait(result.loaded.executable, watch.checkpoint)
            result.tier = result.loaded.executable.tier
        return result

    def _compile_spec(self, spec: CompileSpec, watch: Stopwatch) -> CompileResult:
        device = self.devices.resolve(spec.device)
        record = None
        if spec.graph_digest is not None:
            known = (spec.graph_digest, tuple(spec.feeds), tuple(spec.fetches), device.name, spec.graph_name)
            with watch.stage("resolve"):
                loaded = None if spec.graph_def else self._loaded_by_digest(known)
            if loaded is not None:
                return CompileResult(loaded, self.tiers.l1.tier, watch.ms)
            by_digest.check_graph_limits(spec, self.settings)
            record = self.records.name(by_digest.binding_ingredients(spec, self.setting_ingredients(device)))
            recorded = None if spec.graph_def else self._bind_recorded(record, device, watch)
            if recorded is not None:
                self.executables.remember(known, recorded.loaded)
                return recorded
            with watch.stage("resolve"):
                spec = dataclasses.replace(spec, graph_def=by_digest.graph_def(self.blobs, spec))
        with watch.stage("parse"):
            compile_unit = unit.build(spec.graph_def, spec.feeds, spec.fetches, self.settings, device.platform)
        graph, inputs = compile_unit.graph, compile_unit.inputs
        with watch.stage("key"):
            key = cache_key(self.ingredients(graph, inputs, device))
        executable, tier = self.tiers.get(key, device) or self._compile_miss(
            key, device, watch, lambda: self._compile(key, spec, graph, inputs, device, watch))
        with watch.stage("bind"):
            values = weight_values(graph)
            blobs = [digest_of(dtypes.byte_view(v)) for v in values]
        outputs = [dataclasses.replace(s, name=str(f)) for s, f in zip(executable.outputs, graph.fetches)]
        # Then the assigned variables, by this request's names: the key ignores node names, so the executable may
        # have been compiled for a graph whose variables are named otherwise (its inputs say how).
        renamed = {e.name: i.name for e, i in zip(executable.inputs, inputs)}
        outputs += [dataclasses.replace(s, name=renamed[s.name]) for s in executable.outputs[len(outputs):]]
        loaded = self.executables.bind(executable, lambda indices: [values[i] for i in indices],
                                       [b.hash for b in blobs], inputs, outputs, device, self._keep(watch),
                                       watch.stage)
        if record is not None:
            with watch.stage("record"):
                by_digest.keep_record(self.blobs, self.records, record, loaded, values, blobs)
            self.executables.remember(known, loaded)
        return CompileResult(loaded, tier, watch.ms)

    def graph_of(self, spec: CompileSpec) -> tuple[CompileSpec, bytes]:
        """A Compile by digest's GraphDef, kept in the blob tiers, and the request by its digest alone: what a
        dynamic executable keeps to compile its buckets when Executes first need them."""
        by_digest.check_graph_limits(spec, self.settings)
        graph_def = by_digest.graph_def(self.blobs, spec)
        return dataclasses.replace(spec, graph_def=b"", graph_manifest=None), graph_def

    def _bind_recorded(self, record: str, device: DeviceRef, watch: Stopwatch) -> CompileResult | None:
        """The binding of a Compile by digest from its record, without the graph: the executable from the tiers
        by its key, the weights it binds from their blobs. None when a tier lacks the record, the executable or a
        blob: the Compile then resolves its graph."""
        with watch.stage("record"):
            binding = self.records.get(record)
        if binding is None:
            return None
        key = binding.executable_key
        found = self.tiers.get(key, device) or self._compile_miss(key, device, watch)
        if found is None:
            return None
        executable, tier = found
        if [(p.dtype, p.shape) for p in executable.params] != [(w.dtype, w.shape) for w, _ in binding.weights]:
            log.warning("binding record %s names %s, whose weights are not the record's; not used", record, key)
            return None

        def read(indices: list[int]) -> list[np.ndarray]:
            with watch.stage("record"):
                values = self.records.weights(binding, indices)
            if values is None:
                raise MissingWeights(record)
            return values
        try:
            loaded = self.executables.bind(executable, read, [blob.hash for _, blob in binding.weights],
                                           binding.inputs, binding.outputs, device, self._keep(watch), watch.stage)
        except MissingWeights:
            return None
        return CompileResult(loaded, tier, watch.ms)

    def _keep(self, watch: Stopwatch) -> Callable[[str, Callable[[], None]], None]:
        """How a bind keeps the prepared weights it computed: on the tier-up worker, once the Compile answered."""
        return functools.partial(self.tier_up.keep, start=watch.answered)

    def _loaded_by_digest(self, known: tuple) -> LoadedExecutable | None:
        """The binding a Compile by digest made before, while it is loaded and its executable in L1 (counted as
        an L1 hit): no graph is read, parsed or hashed."""
        loaded = self.executables.remembered(known)
        if loaded is None:
            return None
        executable = loaded.executable
        if self.tiers.l1.get(executable.key, executable.device) is None:  # uncounted: the Compile goes on
            return None
        return loaded if self.tiers.get(executable.key, executable.device) else None

    @within_limits
    def dump_passes(self, spec: CompileSpec) -> list[tuple[str, str]]:
        """(label, pbtxt) of the graph after each pass, for `xlacs compile --dump-graphs`."""
        device = self.devices.resolve(spec.device)
        if spec.graph_digest is not None:
            by_digest.check_graph_limits(spec, self.settings)
        graph_def = spec.graph_def if spec.graph_digest is None else by_digest.graph_def(self.blobs, spec)
        graph = unit.build(graph_def, spec.feeds, spec.fetches, self.settings, device.platform).graph
        dumps = []
        run_pipeline(graph, lambda label, g: dumps.append((label, graph_text(g))))
        return dumps

    def ingredients(self, graph: Graph, inputs: list[TensorSig], device: DeviceRef) -> list[tuple[str, str]]:
        """What the program depends on, named (docs/cache.md). Values of constants kept in the program are in
        the fingerprint; values of lifted weights are not, so a weight-swapped model shares the program. The
        graph's name is not an ingredient: it labels the executable (the first name it was compiled under)."""
        return [
            ("graph_fingerprint", fingerprint(graph)),
            # Positions, dtypes and shapes only: names are the binding's, so renamed graphs share a program.
            ("signature", repr(([(str(s.dtype), s.shape) for s in inputs], len(graph.fetches)))),
            *self.setting_ingredients(device),
        ]

    def setting_ingredients(self, device: DeviceRef) -> list[tuple[str, str]]:
        """What a program depends on besides its graph and signature: the device kind, the runtime, the options
        and settings it was compiled under, the code that lowered it."""
        return [
            ("device", device_identity(device)),
            ("runtime", runtime_identity(device)),
            ("compile_options", f"{compile_options_identity(device)};"
                                f"lift_threshold_bytes={self.settings.lift_threshold_bytes};"
                                f"lift_min_float_elements={self.settings.lift_min_float_elements};"
                                f"xla_options={xla_options.identity(self.xla_options)}"),
            ("code", code_identity()),
            ("cache_format", str(CACHE_FORMAT_VERSION)),
        ]

    def _compile_miss(self, key: str, device: DeviceRef, watch: Stopwatch,
                      compile: Callable[[], tuple[Executable, bytes]] | None = None) -> tuple[Executable, str] | None:
        """(executable, the tier that had it or "miss", when `compile()` made it) after an L1 miss, or None when
        no tier has it and there is no `compile`. One request per key goes on at a time in this process, and
        across the replicas that share a tier with leases (Tiers.lookup)."""
        with self._single_flight(key):
            watch.checkpoint("load")
            start = time.perf_counter()
            with self.tiers.lookup(key, device, watch.checkpoint) as found:
                watch.ms["load"] = (time.perf_counter() - start) * 1e3
                hit = found if isinstance(found, Hit) else None
                if hit is None and compile is None:
                    return None
                if hit is None:
                    executable, serialized = compile()
                else:
                    executable, serialized = hit.executable, hit.executable.serialized
                if not self.isolates(executable.stablehlo):
                    executable.serialized = None  # runs in the daemon: no worker will load it
                with watch.stage("store"):
                    if hit is None and executable.tier == QUICK:  # the shared tiers get the optimized one
                        # Queued before L1 has it, so that a call that finds it there can wait for its tier-up.
                        self.tier_up.submit(executable, found.keep(), functools.partial(self.tiers.put, executable),
                                            start=watch.answered)
                        self.tiers.l1.put(executable, serialized)
                    else:
                        self.tiers.put(executable, serialized, hit)
            return executable, hit.tier if hit else "miss"

    def _compile(self, key, spec, graph, inputs, device, watch) -> tuple[Executable, bytes]:
        """Passes, lowering and the XLA compile: the executable and its serialized form."""
        with watch.slot(), metrics.compiling(device.name, watch.ms):
            with watch.stage("passes"):
                graph, records = run_pipeline(graph, self._dumper(key))
            watch.checkpoint("lower")
            # A call that waits for the optimized program compiles it at once, not a quick one first.
            min_ops = 0 if spec.wait_optimized else self.settings.tiered_min_ops
            program = compile_graph(graph, device, watch.checkpoint, self.xla_options, functools.partial(
                tier_up.tiered, platform=device.platform, min_ops=min_ops, isolated=self.isolates))
            watch.ms["lower"] = program.lower_ms
            watch.ms["compile"] = program.compile_ms
        self.counters.add(compiles=1)
        log.info("compiled %s on %s in %.0f ms (%s)", key, device.name, sum(watch.ms.values()),
                 ", ".join(f"{k} {v:.0f}" for k, v in watch.ms.items()))
        size = len(program.serialized) + (len(program.prepare.serialized) if program.prepare else 0)
        executable = Executable(key, spec.graph_name or "graph", device, inputs, program.outputs, program.params,
                                program.compiled, program.stablehlo, dict(watch.ms), records, size,
                                op_histogram=dict(collections.Counter(n.op for n in graph.nodes.values())),
                                serialized=program.serialized, prepare=program.prepare,
                                tier=QUICK if program.optimize else OPTIMIZED, optimize=program.optimize)
        return executable, program.serialized

    @contextlib.contextmanager
    def _single_flight(self, key: str):
        """One request per key at a time; the key's lock is dropped once no request holds or awaits it."""
        with self._flights_lock:
            flight = self._flights.setdefault(key, [threading.Lock(), 0])
            flight[1] += 1
        try:
            with flight[0]:
                yield
        finally:
            with self._flights_lock:
                flight[1] -= 1
                if not flight[1]:
                    del self._flights[key]

    def _dumper(self, key: str):
        if not self.settings.dump_graphs:
            return None
        directory = pathlib.Path(self.settings.dump_graphs) / key
        directory.mkdir(parents=True, exist_ok=True)

        def dump(label: str, graph: Graph) -> None:
            (directory / f"{label}.pbtxt").write_text(graph_text(graph))
        return dump

    def isolates(self, stablehlo: str) -> bool:
        """Whether the program runs in an execution worker rather than in the daemon."""
        return self.settings.isolate_executions == "all" or has_loops(stablehlo)

    @within_limits
    def check_graph(self, graph_def: bytes, device: str) -> tuple[collections.Counter, dict[str, list[str]], int]:
        """(op histogram, unsupported ops, node count) of a GraphDef on `device`, compiling nothing."""
        graph = import_graph(graph_def, self.settings)
        histogram = collections.Counter(n.op for n in graph.nodes.values())
        nodes = [*check.graph_calls(graph), *check.function_nodes(graph)]
        return histogram, check.unsupported_ops(nodes, self.devices.resolve(device).platform), len(graph.nodes)
