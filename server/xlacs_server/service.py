"""The compile/execute core behind the RPCs: request -> compile unit -> passes -> lowering -> PJRT -> cache."""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import logging
import pathlib
import secrets
import threading
import time
from typing import Callable

import numpy as np
from xlacs import dtypes
from xlacs.v1 import xlacs_pb2

from xlacs_server import metrics
from xlacs_server import passes  # noqa: F401  (registers the passes)
from xlacs_server import unit
from xlacs_server.buckets.dynamic import DynamicExecutable, DynamicExecutables
from xlacs_server.cache import graphs, upload
from xlacs_server.cache.bindings import Binding, BindingRecords
from xlacs_server.cache.blobs import Digest, digest_of, open_blobs
from xlacs_server.cache.persistent import PersistentTier
from xlacs_server.cache.tiers import Hit, open_tiers
from xlacs_server.compile.cache_key import (CACHE_FORMAT_VERSION, cache_key, code_identity, compile_options_identity,
                                            device_identity, runtime_identity)
from xlacs_server.compile import tier_up, xla_options
from xlacs_server.compile.compiler import compile_graph
from xlacs_server.compile.tier_up import TierUp
from xlacs_server.config import Settings
from xlacs_server.errors import InvalidRequest, LimitExceeded, NotFound, echoed
from xlacs_server.execute.devices import DeviceRef, Devices, enumerate_devices
from xlacs_server.execute.executable import OPTIMIZED, QUICK, Executable, LoadedExecutable, RunTimes
from xlacs_server.execute.isolation import ISOLATION_POLICIES, Workers, has_loops
from xlacs_server.execute.resident import ResidentTensors, kept
from xlacs_server.execute.shared_memory import SharedMemory
from xlacs_server.execute.states import VariableStates
from xlacs_server.execute.weights import WeightStore, content_hash, weights_digest
from xlacs_server.graph import limits as graph_limits
from xlacs_server.graph.fingerprint import fingerprint
from xlacs_server.graph.importer import graph_text, import_graph
from xlacs_server.graph.ir import Graph
from xlacs_server.lower import check, limits
from xlacs_server.lower import ops  # noqa: F401  (registers the lowerings)
from xlacs_server.passes.registry import run_pipeline
from xlacs_server.rpc.limits import Gates
from xlacs_server.tensor_sig import TensorSig
from xlacs_server.unit.signature import Feed
from xlacs_server.unit.variables import INPUT_PREFIX as VARIABLE_PREFIX
from xlacs_server.unit.weights import weight_values

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CompileSpec:
    """A Compile request: the GraphDef and its signature, the device to compile for, the executable's name. A
    Compile by digest names the GraphDef by `graph_digest` (its bytes, if sent too, are checked and kept), with
    the request's manifest (xlacs.v1.GraphManifest) if it has one."""
    graph_def: bytes
    feeds: list[Feed]
    fetches: list[str]
    device: str = ""
    graph_name: str = ""
    graph_digest: Digest | None = None
    graph_manifest: xlacs_pb2.GraphManifest | None = None
    bucket_sizes: tuple[int, ...] = ()  # for feeds with unknown (-1) dims (buckets/)
    wait_optimized: bool = False  # answer with the optimized program, never a tiered compile's quick one


@dataclasses.dataclass
class CompileResult:
    loaded: LoadedExecutable
    cache: str  # "miss" or the tier that hit
    stage_ms: dict[str, float]
    tier: str = ""  # the program it answered with (execute/executable.py's QUICK or OPTIMIZED)


def no_checkpoint(stage: str) -> None:
    """A call made in-process runs to its end."""


@contextlib.contextmanager
def no_slot():
    """A call made in-process waits for no slot."""
    yield


def within_limits(method):
    """Runs a service method with the settings' element limit in scope of the passes and the lowering, and a
    fresh decode budget for the request's GraphDef."""
    @functools.wraps(method)
    def scoped(self, *args, **kwargs):
        with limits.max_tensor_elements(self.settings.max_tensor_elements), graph_limits.decode_budget(self.settings):
            return method(self, *args, **kwargs)
    return scoped


class Stopwatch:
    """Times the stages of a call; `checkpoint(stage)` runs before each, and raises to stop the call there;
    `slot()` holds one of the daemon's compile slots (rpc/limits.py) around the costly stages."""

    def __init__(self, checkpoint: Callable[[str], None] = no_checkpoint, slot=no_slot):
        self.ms: dict[str, float] = {}
        self.checkpoint = checkpoint
        self._slot = slot
        # Set once the call has its answer (or its error): a tier-up it queued starts then, so that the optimizing
        # compile does not slow the bind and the prepare run of the Compile it answers (compile/tier_up.py).
        self.answered = threading.Event()

    @contextlib.contextmanager
    def slot(self):
        start = time.perf_counter()
        with self._slot():
            self.ms["queue"] = (time.perf_counter() - start) * 1e3
            yield

    @contextlib.contextmanager
    def stage(self, name: str):
        self.checkpoint(name)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - start) * 1e3


@dataclasses.dataclass
class Counters:
    requests: int = 0  # RPCs received, counted by the interceptor
    compiles: int = 0
    executes: int = 0
    errors: int = 0
    upload_saved_bytes: int = 0  # bytes of blobs FindMissingBlobs found here already: not uploaded
    bucket_compiles: int = 0  # XLA compiles of a bucket of a dynamic executable (buckets/)
    padding_elements: int = 0  # zeros added to the inputs with unknown dims, of
    padded_elements: int = 0  # all their elements as padded
    received_bytes: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # by RPC
    started: float = dataclasses.field(default_factory=time.time)
    recent_errors: collections.deque = dataclasses.field(default_factory=lambda: collections.deque(maxlen=100))
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **deltas: int) -> None:
        """Adds to counters; RPCs on many threads count at once, and `+=` alone could lose some."""
        with self._lock:
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)

    def add_received(self, rpc: str, size: int) -> None:
        with self._lock:
            self.received_bytes[rpc] += size

    def received(self) -> dict[str, int]:
        """Request bytes received by RPC, as of now (a new RPC may be added while a reader iterates)."""
        with self._lock:
            return dict(sorted(self.received_bytes.items()))


class CompilationService:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.devices = Devices(enumerate_devices(settings.devices, settings.require_gpu))
        self.xla_options = xla_options.parse(settings.xla_options)
        xla_options.check_options(self.xla_options, [d.device for d in self.devices.all])
        self.tiers = open_tiers(settings)  # the cache, fastest first; each tier has .tier (its name) and .stats
        self.blobs = open_blobs(settings, self.tiers)  # blobs and graph manifests, in the same tiers
        # Binding records, signed with the first shared tier's secret (a process-only one without such a tier)
        self.records = BindingRecords(self.blobs, next(
            (tier.secret for tier in self.tiers if isinstance(tier, PersistentTier)), secrets.token_bytes(32)))
        self.counters = Counters()
        self.weights = WeightStore()
        self.resident = ResidentTensors(settings.max_resident_bytes, settings.max_resident_tensors,
                                        settings.resident_ttl_s)
        self.shared_memory = SharedMemory(settings)  # sessions and their regions (docs/data_plane.md)
        self.states = VariableStates(settings.max_state_bytes, settings.max_states)  # docs/training.md
        if settings.isolate_executions not in ISOLATION_POLICIES:
            raise ValueError(f"isolate_executions={settings.isolate_executions!r}: use one of {ISOLATION_POLICIES}")
        self.workers = Workers()
        self.tier_up = TierUp()  # the optimizing compiles of tiered compiles (compile/tier_up.py)
        self.draining = False  # set by the daemon's shutdown: calls in flight finish, no new ones come
        self._loaded: collections.OrderedDict[str, LoadedExecutable] = collections.OrderedDict()
        self._loaded_lock = threading.Lock()
        self._flights: dict[str, list] = {}  # key -> [lock, requests holding or awaiting it]
        self._flights_lock = threading.Lock()
        # A Compile by digest whose graph, signature, device and name were bound before -> that binding's id
        self._by_digest: collections.OrderedDict[tuple, str] = collections.OrderedDict()
        self.dynamic = DynamicExecutables(self)  # executables of feeds with unknown dims (buckets/)
        self.gates = Gates(settings)  # the compile and execute slots, shared by every transport (rpc/limits.py)
        # Imported here: models/ compiles and executes through this module's service.
        from xlacs_server.models.repository import ModelRepository
        self.models = ModelRepository(self)  # the model repository's served models (empty without one)

    def unready(self, *, models: bool = False) -> str:
        """Why the daemon takes no calls now, "" when it takes them: draining for shutdown, no devices, every slot of
        a gate stuck (rpc/limits.py); with `models`, also the model repository's initial load not ended (the Open
        Inference Protocol's readiness on both transports). Every probe asks it (rpc/readiness.py)."""
        return ("draining" if self.draining else "no devices" if not self.devices.all else self.gates.stuck()
                or ("the model repository is loading" if models and not self.models.ready else ""))

    # --- Compile ---------------------------------------------------------------------------------

    @within_limits
    def compile(self, spec: CompileSpec, checkpoint: Callable[[str], None] = no_checkpoint,
                slot=no_slot) -> CompileResult:
        """The executable of `spec`, from a cache or compiled; `checkpoint(stage)` may stop it between stages,
        and only an XLA compile takes a `slot()`: a cache hit waits for none. With `spec.wait_optimized`, the answer
        waits for a tiered compile's optimized program (compile/tier_up.py; the wait is the stage "tier_up")."""
        watch = Stopwatch(checkpoint, slot)
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
            by_digest = (spec.graph_digest, tuple(spec.feeds), tuple(spec.fetches), device.name, spec.graph_name)
            with watch.stage("resolve"):
                loaded = None if spec.graph_def else self._loaded_by_digest(by_digest)
            if loaded is not None:
                return CompileResult(loaded, self.tiers.l1.tier, watch.ms)
            self._check_graph_limits(spec)
            record = self.records.name(self._binding_ingredients(spec, device))
            recorded = None if spec.graph_def else self._bind_recorded(record, device, watch)
            if recorded is not None:
                self._remember(by_digest, recorded.loaded)
                return recorded
            with watch.stage("resolve"):
                spec = dataclasses.replace(spec, graph_def=self._graph_def(spec))
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
        loaded = self._bind(executable, values, blobs, inputs, outputs, device, watch)
        if record is not None:
            with watch.stage("record"):
                self._keep_record(record, loaded, values, blobs)
            self._remember(by_digest, loaded)
        return CompileResult(loaded, tier, watch.ms)

    @within_limits
    def compile_dynamic(self, spec: CompileSpec, checkpoint: Callable[[str], None] = no_checkpoint,
                        slot=no_slot) -> tuple[DynamicExecutable, str, dict[str, float]]:
        """(executable, cache, stage_ms) of a Compile whose feeds have unknown dims (buckets/dynamic.py)."""
        watch = Stopwatch(checkpoint, slot)
        dynamic, cache = self.dynamic.compile(spec, watch)
        return dynamic, cache, watch.ms

    def graph_of(self, spec: CompileSpec) -> tuple[CompileSpec, bytes]:
        """A Compile by digest's GraphDef, kept in the blob tiers, and the request by its digest alone: what a
        dynamic executable keeps to compile its buckets when Executes first need them."""
        self._check_graph_limits(spec)
        graph_def = self._graph_def(spec)
        return dataclasses.replace(spec, graph_def=b"", graph_manifest=None), graph_def

    def _binding_ingredients(self, spec: CompileSpec, device: DeviceRef) -> list[tuple[str, str]]:
        """What a Compile by digest's binding depends on, named: its binding record's name (cache/bindings.py)."""
        return [("graph_digest", str(spec.graph_digest)), ("feeds", repr(spec.feeds)),
                ("fetches", repr(spec.fetches)), ("graph_name", spec.graph_name), *self._setting_ingredients(device)]

    def _bind_recorded(self, record: str, device: DeviceRef, watch: Stopwatch) -> CompileResult | None:
        """The binding of a Compile by digest from its record, without the graph: the executable from the tiers
        by its key, the weights from their blobs. None when a tier lacks the record, the executable or a blob:
        the Compile then resolves its graph."""
        with watch.stage("record"):
            binding = self.records.get(record)
            values = None if binding is None else self.records.weights(binding)
        if values is None:
            return None
        key = binding.executable_key
        found = self.tiers.get(key, device) or self._compile_miss(key, device, watch)
        if found is None:
            return None
        executable, tier = found
        if [(p.dtype, p.shape) for p in executable.params] != [(w.dtype, w.shape) for w, _ in binding.weights]:
            log.warning("binding record %s names %s, whose weights are not the record's; not used", record, key)
            return None
        loaded = self._bind(executable, values, [blob for _, blob in binding.weights], binding.inputs,
                            binding.outputs, device, watch)
        return CompileResult(loaded, tier, watch.ms)

    def _keep_record(self, record: str, loaded: LoadedExecutable, values: list[np.ndarray],
                     blobs: list[Digest]) -> None:
        """The binding's record, and a blob of each weight's bytes that no tier holds (one not cut out of the
        graph by its manifest: under its cut size, or written as a list of values)."""
        missing = set(self.blobs.missing(blobs))
        for value, blob in zip(values, blobs):
            if blob in missing:
                self.blobs.put(blob, bytes(dtypes.byte_view(value)))
                missing.discard(blob)
        weights = [(TensorSig("", v.dtype, v.shape), blob) for v, blob in zip(values, blobs)]
        self.records.put(record, Binding(loaded.executable.key, loaded.inputs, loaded.outputs, weights))

    def _remember(self, by_digest: tuple, loaded: LoadedExecutable) -> None:
        """A Compile by digest's binding, for the next one with the same graph, signature, device and name."""
        with self._loaded_lock:
            self._by_digest[by_digest] = loaded.id
            self._by_digest.move_to_end(by_digest)
            while len(self._by_digest) > self.settings.max_loaded:
                self._by_digest.popitem(last=False)

    def _graph_def(self, spec: CompileSpec) -> bytes:
        """The GraphDef of a Compile by digest: its bytes if sent (checked and kept), else put together from the
        tiers' blobs (cache/graphs.py; NOT_FOUND with MissingBlobs for what they lack)."""
        if spec.graph_def:
            graphs.register(self.blobs, spec.graph_digest, spec.graph_def, spec.graph_manifest)
            return spec.graph_def
        return graphs.resolve(self.blobs, spec.graph_digest, spec.graph_manifest)

    def _check_graph_limits(self, spec: CompileSpec) -> None:
        """LimitExceeded for a Compile by digest whose graph or manifest is over the limits, before any tier is
        looked in."""
        if spec.graph_digest.size > self.settings.max_graph_bytes:
            raise LimitExceeded(f"graph_digest names a graph of {spec.graph_digest.size} bytes", "max_graph_bytes",
                                self.settings.max_graph_bytes)
        if spec.graph_manifest is not None and len(spec.graph_manifest.cuts) > self.settings.max_graph_nodes:
            raise LimitExceeded(f"graph_manifest has {len(spec.graph_manifest.cuts)} cuts", "max_graph_nodes",
                                self.settings.max_graph_nodes)

    def _loaded_by_digest(self, by_digest: tuple) -> LoadedExecutable | None:
        """The binding a Compile by digest made before, while it is loaded and its executable in L1 (counted as
        an L1 hit): no graph is read, parsed or hashed. An entry whose binding is gone is dropped."""
        with self._loaded_lock:
            loaded = self._loaded.get(self._by_digest.get(by_digest, ""))
            if loaded is None:
                self._by_digest.pop(by_digest, None)
                return None
            self._loaded.move_to_end(loaded.id)
        executable = loaded.executable
        if self.tiers.l1.get(executable.key, executable.device) is None:  # uncounted: the Compile goes on
            return None
        return loaded if self.tiers.get(executable.key, executable.device) else None

    @within_limits
    def dump_passes(self, spec: CompileSpec) -> list[tuple[str, str]]:
        """(label, pbtxt) of the graph after each pass, for `xlacs compile --dump-graphs`."""
        device = self.devices.resolve(spec.device)
        if spec.graph_digest is not None:
            self._check_graph_limits(spec)
        graph_def = spec.graph_def if spec.graph_digest is None else self._graph_def(spec)
        graph = unit.build(graph_def, spec.feeds, spec.fetches, self.settings, device.platform).graph
        dumps = []
        run_pipeline(graph, lambda label, g: dumps.append((label, graph_text(g))))
        return dumps

    def _bind(self, executable: Executable, values: list[np.ndarray], blobs: list[Digest], inputs: list[TensorSig],
              outputs: list[TensorSig], device: DeviceRef, watch: Stopwatch) -> LoadedExecutable:
        """The executable bound to the lifted weights `values` (whose raw bytes' digests are `blobs`) and to the
        names of `inputs` and `outputs`; its id adds the weights' digest to the key. An executable with a prepare
        part runs it on the weights (stage "prepare") unless a binding of the same weights holds its results; the
        lifted weights that only it reads are then uploaded for that run only."""
        with watch.stage("bind"):
            size = sum(v.nbytes for v in values)
            if size > self.settings.max_weight_bytes:
                raise LimitExceeded(f"the graph's weights take {size} bytes", "max_weight_bytes",
                                    self.settings.max_weight_bytes)
            hashes = [content_hash(v.dtype, v.shape, blob.hash) for v, blob in zip(values, blobs)]
            digest = weights_digest(hashes)
            prepare = executable.prepare
            call = range(len(values)) if prepare is None else prepare.call_params
            buffers = self.weights.upload([values[i] for i in call], [hashes[i] for i in call], device.device)
        if prepare is not None:
            with watch.stage("prepare"):
                prepared, _ = self.weights.prepared(
                    f"{executable.key}.{digest}", len(prepare.outputs), device.device,
                    lambda: prepare.run(self.weights.upload(values, hashes, device.device)))
            buffers += prepared
        with watch.stage("bind"):
            loaded = self._register(executable, inputs, outputs, digest if values else "", buffers)
        return loaded

    def _register(self, executable: Executable, inputs: list[TensorSig], outputs: list[TensorSig], digest: str,
                  buffers: list) -> LoadedExecutable:
        """The binding under its executable id, the least recently used ones dropped past the budgets."""
        loaded = LoadedExecutable(self._executable_id(executable, digest), executable, buffers, inputs, outputs)
        with self._loaded_lock:
            self._loaded[loaded.id] = loaded
            self._loaded.move_to_end(loaded.id)
            # Least recently used ids go first; an Execute of one then gets NOT_FOUND, and the client compiles
            # again (an L1 hit that uploads the weights anew).
            while len(self._loaded) > self.settings.max_loaded or (
                    len(self._loaded) > 1 and self.weights.resident_bytes() > self.settings.max_weight_bytes):
                self._loaded.popitem(last=False)
                self.weights.evicted()
        return loaded

    def _executable_id(self, executable: Executable, digest: str) -> str:
        """The cache key, then the weights' digest if it has weights, then `@device` if the program is loaded on a
        device other than the default one: each device holds its own binding."""
        device = executable.device.name
        return (f"{executable.key}.{digest[:16]}" if digest else executable.key) + \
            ("" if device == self.devices.resolve("").name else f"@{device}")

    def ingredients(self, graph: Graph, inputs: list[TensorSig], device: DeviceRef) -> list[tuple[str, str]]:
        """What the program depends on, named (docs/cache.md). Values of constants kept in the program are in
        the fingerprint; values of lifted weights are not, so a weight-swapped model shares the program. The
        graph's name is not an ingredient: it labels the executable (the first name it was compiled under)."""
        return [
            ("graph_fingerprint", fingerprint(graph)),
            # Positions, dtypes and shapes only: names are the binding's, so renamed graphs share a program.
            ("signature", repr(([(str(s.dtype), s.shape) for s in inputs], len(graph.fetches)))),
            *self._setting_ingredients(device),
        ]

    def _setting_ingredients(self, device: DeviceRef) -> list[tuple[str, str]]:
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
                if not self._isolates(executable.stablehlo):
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
                tier_up.tiered, platform=device.platform, min_ops=min_ops, isolated=self._isolates))
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

    # --- Execute and introspection ------------------------------------------------------------------

    def loaded(self, executable_id: str) -> LoadedExecutable:
        with self._loaded_lock:
            loaded = self._loaded.get(executable_id)
            if loaded is not None:
                self._loaded.move_to_end(executable_id)
        if loaded is None:
            raise NotFound(f"executable {echoed(executable_id)} is not loaded on this server; Compile it first")
        return loaded

    def check_input_bytes(self, size: int) -> None:
        """LimitExceeded for inputs of `size` bytes in all, over max_input_bytes."""
        if size > self.settings.max_input_bytes:
            raise LimitExceeded(f"the inputs have {size} bytes", "max_input_bytes", self.settings.max_input_bytes)

    def execute(self, executable_id: str, inputs: dict[str, np.ndarray], client_s: float | None = None,
                keep: dict[str, float] | None = None, state_id: str = "",
                times: RunTimes | None = None) -> tuple[Executable, list]:
        """The outputs of an executable; `client_s`, the time left before the client's deadline, bounds a run
        in an execution worker as execute_deadline_s does. An input may be a resident tensor's array
        (execute/resident.py); the outputs named in `keep` (name -> time to live, 0 for the default) stay on the
        device, returned as ResidentTensors. With a variable state (execute/states.py), the variables come from it
        and the values the run assigns go back to it: the outputs are then the fetches only. `times`, when
        given, gets where the run's time went (a served model's statistics)."""
        loaded = self.loaded(executable_id)
        positions = frozenset(kept(loaded, keep)) if keep else frozenset()
        size = sum(a.nbytes for a in inputs.values() if isinstance(a, np.ndarray))  # not the resident ones
        self.check_input_bytes(size)
        if not state_id:
            outputs = self._run(loaded, inputs, positions, client_s, times=times)
        else:
            outputs = self._step(loaded, inputs, positions, client_s, state_id)
        if positions:
            outputs = self.resident.keep_outputs(loaded, outputs, keep)
        self.counters.add(executes=1)
        return loaded.executable, outputs

    def _run(self, loaded: LoadedExecutable, inputs: dict, positions: frozenset[int], client_s: float | None,
             handed_over: bool = False, times: RunTimes | None = None) -> list:
        executable = loaded.executable
        with metrics.executing(executable.device.name):
            if executable.isolated:
                limit_s = self.settings.execute_deadline_s
                timeout_s, why = (client_s, "the client's deadline") if client_s is not None and client_s < limit_s \
                    else (limit_s, f"the server's limit execute_deadline_s={limit_s:g} s")
                start = time.perf_counter()
                outputs = self.workers.pool(executable.device).run(
                    loaded.id, lambda: (executable.serialized, [np.asarray(w) for w in loaded.weights]),
                    [np.asarray(a) for a in loaded.check_inputs(inputs)], timeout_s, why)
                if times is not None:  # a worker's run is not split: all of it counts as the program's
                    times.infer_s = time.perf_counter() - start
                return outputs
            return loaded.run(inputs, positions, handed_over, times)

    def _step(self, loaded: LoadedExecutable, inputs: dict, positions: frozenset[int], client_s: float | None,
              state_id: str) -> list:
        """A run on a variable state, holding it: its assigned variables stay on the device and replace the
        state's; the fetches are returned."""
        named = sorted(n for n in inputs if n.startswith(VARIABLE_PREFIX))
        if named:
            raise InvalidRequest(f"input {named[0]!r}: with a state (state_id), the variables come from the state; "
                                 "send only the feeds", input=named[0])
        fetches = [i for i, s in enumerate(loaded.outputs) if not s.name.startswith(VARIABLE_PREFIX)]
        kept_variables = sorted(loaded.outputs[i].name for i in positions.difference(fetches))
        if kept_variables:
            raise InvalidRequest(f"output {kept_variables[0]!r} goes to the state: read it with ReadVariables, "
                                 "keep only fetches", output=kept_variables[0])
        assigned = [s.name for s in loaded.outputs[len(fetches):]]
        with self.states.stepping(state_id) as state:
            given = {**inputs, **state.inputs_for(loaded)}
            outputs = self._run(loaded, given, positions.union(range(len(fetches), len(loaded.outputs))), client_s,
                                handed_over=True)
            state.assign(assigned, outputs[len(fetches):])
        return outputs[:len(fetches)]

    # --- Blobs ---------------------------------------------------------------------------------------

    def find_missing_blobs(self, digests: list[Digest]) -> list[Digest]:
        """The digests no cache tier holds; the bytes of the others count as upload savings."""
        if len(digests) > self.settings.max_graph_nodes:
            raise LimitExceeded(f"FindMissingBlobs asks about {len(digests)} digests", "max_graph_nodes",
                                self.settings.max_graph_nodes)
        missing = self.blobs.missing(digests)
        self.counters.add(upload_saved_bytes=sum(d.size for d in set(digests).difference(missing)))
        return missing

    def upload_blobs(self, chunks, checkpoint: Callable[[str], None] = no_checkpoint) -> tuple[int, int]:
        """(blobs, bytes) stored from a stream of xlacs.v1.BlobChunk, each checked against its digest."""
        return upload.upload(self.blobs, chunks, self.settings.max_graph_bytes, checkpoint)

    def close(self) -> None:
        """At shutdown: ends the sessions (unmapping their regions), stops the execution workers and releases the
        cache leases still held."""
        self.models.close()
        self.shared_memory.close_all()
        self.workers.close()
        self.resident.close()
        self.states.close()
        self.tier_up.close()
        self.tiers.close()

    def _isolates(self, stablehlo: str) -> bool:
        """Whether the program runs in an execution worker rather than in the daemon."""
        return self.settings.isolate_executions == "all" or has_loops(stablehlo)

    @within_limits
    def check_graph(self, graph_def: bytes, device: str) -> tuple[collections.Counter, dict[str, list[str]], int]:
        graph = import_graph(graph_def, self.settings)
        histogram = collections.Counter(n.op for n in graph.nodes.values())
        nodes = [*check.graph_calls(graph), *check.function_nodes(graph)]
        return histogram, check.unsupported_ops(nodes, self.devices.resolve(device).platform), \
            len(graph.nodes)
