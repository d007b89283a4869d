"""The compile/execute core behind the RPCs: it opens the stages' parts from the settings and composes them. The
compile path is pipeline/compile_path.py, the execute path execute/runner.py; a Compile by digest's blobs are the
cache's (cache/blobs.py, cache/upload.py)."""
from __future__ import annotations

import secrets
from typing import Callable

import numpy as np

from xlacs_server import passes  # noqa: F401  (registers the passes)
from xlacs_server.cache import upload
from xlacs_server.cache.bindings import BindingRecords
from xlacs_server.cache.blobs import open_blobs
from xlacs_server.cache.persistent import PersistentTier
from xlacs_server.cache.prepared import PreparedWeights
from xlacs_server.cache.tiers import open_tiers
from xlacs_server.compile import xla_options
from xlacs_server.compile.tier_up import TierUp
from xlacs_server.config import Settings
from xlacs_server.counters import Counters
from xlacs_server.digest import Digest
from xlacs_server.execute.device_budget import DeviceBudget, default_limit
from xlacs_server.execute.devices import Devices, enumerate_devices
from xlacs_server.execute.executable import Executable, LoadedExecutable, RunTimes
from xlacs_server.execute.isolation import ISOLATION_POLICIES, Workers
from xlacs_server.execute.loaded import LoadedExecutables
from xlacs_server.execute.resident import ResidentTensors
from xlacs_server.execute.runner import Runner
from xlacs_server.execute.shared_memory import SharedMemory
from xlacs_server.execute.states import VariableStates
from xlacs_server.execute.weights import WeightStore
from xlacs_server.gates import Gates
from xlacs_server.lower import ops  # noqa: F401  (registers the lowerings)
from xlacs_server.pipeline.compile_path import CompilePath
from xlacs_server.pipeline.request import CompileResult, CompileSpec, Stopwatch, no_checkpoint, no_slot, within_limits


class CompilationService:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.devices = Devices(enumerate_devices(settings.devices, settings.require_gpu))
        self.xla_options = xla_options.parse(settings.xla_options)
        xla_options.check_options(self.xla_options, [d.device for d in self.devices.all])
        self.tiers = open_tiers(settings)  # the cache, fastest first; each tier has .tier (its name) and .stats
        self.blobs = open_blobs(settings, self.tiers)  # blobs and graph manifests, in the same tiers
        # Binding records, signed with the first shared tier's secret (a process-only one without such a tier)
        shared = next((tier for tier in self.tiers if isinstance(tier, PersistentTier)), None)
        self.records = BindingRecords(self.blobs, shared.secret if shared else secrets.token_bytes(32))
        # Prepared weights, beside the executables in the shared tiers (none without one: they are held while bound)
        kept = shared and PreparedWeights(self.blobs, shared.secret, settings.cache_max_entry_bytes)
        self.counters = Counters()
        # What each device keeps (weights, resident tensors, states) counts against its budget (max_device_bytes)
        self.budget = DeviceBudget({d.name: default_limit(settings, d) for d in self.devices.all})
        self.weights = WeightStore(self.budget)
        self.resident = ResidentTensors(settings.max_resident_bytes, settings.max_resident_tensors,
                                        settings.resident_ttl_s, self.budget)
        self.shared_memory = SharedMemory(settings)  # sessions and their regions (docs/data_plane.md)
        self.states = VariableStates(settings.max_state_bytes, settings.max_states, self.budget)  # docs/training.md
        if settings.isolate_executions not in ISOLATION_POLICIES:
            raise ValueError(f"isolate_executions={settings.isolate_executions!r}: use one of {ISOLATION_POLICIES}")
        self.workers = Workers()
        self.tier_up = TierUp()  # the optimizing compiles of tiered compiles (compile/tier_up.py)
        self.draining = False  # set by the daemon's shutdown: calls in flight finish, no new ones come
        self.executables = LoadedExecutables(settings, self.weights, self.devices.resolve("").name, kept)
        self.compile_path = CompilePath(settings, self.devices, self.xla_options, self.tiers, self.blobs,
                                        self.records, self.executables, self.tier_up, self.counters)
        self.runner = Runner(settings, self.executables, self.workers, self.resident, self.states, self.budget)
        self.gates = Gates(settings)  # the compile and execute slots, shared by every transport (gates.py)

    def unready(self) -> str:
        """Why the service takes no calls now, "" when it takes them: draining for shutdown, no devices, every slot
        of a gate stuck (gates.py). Every probe asks it (rpc/readiness.py)."""
        return "draining" if self.draining else "no devices" if not self.devices.all else self.gates.stuck()

    # --- Compile: pipeline/compile_path.py ------------------------------------------------------------

    @within_limits
    def compile(self, spec: CompileSpec, checkpoint: Callable[[str], None] = no_checkpoint,
                slot=no_slot) -> CompileResult:
        """The executable of `spec`, from a cache or compiled; `checkpoint(stage)` may stop it between stages,
        and only an XLA compile takes a `slot()`: a cache hit waits for none. With `spec.wait_optimized`, the answer
        waits for a tiered compile's optimized program (compile/tier_up.py; the wait is the stage "tier_up")."""
        return self.compile_path.compile(spec, Stopwatch(checkpoint, slot))

    def graph_of(self, spec: CompileSpec) -> tuple[CompileSpec, bytes]:
        """A Compile by digest's GraphDef and the request by its digest alone (buckets/dynamic.py keeps them)."""
        return self.compile_path.graph_of(spec)

    def dump_passes(self, spec: CompileSpec) -> list[tuple[str, str]]:
        """(label, pbtxt) of the graph after each pass, for `xlacs compile --dump-graphs`."""
        return self.compile_path.dump_passes(spec)

    def check_graph(self, graph_def: bytes, device: str):
        """(op histogram, unsupported ops, node count) of a GraphDef on `device`."""
        return self.compile_path.check_graph(graph_def, device)

    # --- Execute: execute/runner.py --------------------------------------------------------------------

    def loaded(self, executable_id: str) -> LoadedExecutable:
        return self.executables.get(executable_id)

    def check_input_bytes(self, size: int) -> None:
        """LimitExceeded for inputs of `size` bytes in all, over max_input_bytes."""
        self.runner.check_input_bytes(size)

    def execute(self, executable_id: str, inputs: dict[str, np.ndarray], client_s: float | None = None,
                keep: dict[str, float] | None = None, state_id: str = "",
                times: RunTimes | None = None) -> tuple[Executable, list]:
        """The outputs of an executable (Runner.execute says what each argument does)."""
        executable, outputs = self.runner.execute(executable_id, inputs, client_s, keep, state_id, times)
        self.counters.add(executes=1)
        return executable, outputs

    # --- Blobs: cache/upload.py ---------------------------------------------------------------------

    def find_missing_blobs(self, digests: list[Digest]) -> list[Digest]:
        """The digests no cache tier holds; the bytes of the others count as upload savings."""
        missing, saved = upload.find_missing(self.blobs, digests, self.settings.max_graph_nodes)
        self.counters.add(upload_saved_bytes=saved)
        return missing

    def upload_blobs(self, chunks, checkpoint: Callable[[str], None] = no_checkpoint) -> tuple[int, int]:
        """(blobs, bytes) stored from a stream of xlacs.v1.BlobChunk, each checked against its digest."""
        return upload.upload(self.blobs, chunks, self.settings.max_graph_bytes, checkpoint)

    def close(self, tier_up_s: float = 0.0) -> None:
        """At shutdown: ends the sessions (unmapping their regions), stops the execution workers, gives the pending
        tier-ups and stores of prepared weights up to `tier_up_s` to keep their results in the shared tiers, and
        releases the cache leases still held."""
        self.shared_memory.close_all()
        self.workers.close()
        self.resident.close()
        self.states.close()
        self.tier_up.close(tier_up_s)
        self.tiers.close()
