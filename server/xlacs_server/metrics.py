"""Prometheus metrics: what the core records as it works, and a collector that reads a service on scrape."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time

import jax
import jaxlib
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from xlacs_server import version

# Recorded by the core (service.py, rpc/errors.py) while it works: one set per process, like the devices.
CORE = CollectorRegistry()
COMPILE_SECONDS = Histogram(
    "xlacs_compile_seconds", "Time of each stage of a compile that missed every cache tier", ["stage"],
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300), registry=CORE)
EXECUTE_SECONDS = Histogram(
    "xlacs_execute_seconds", "Time to run an executable, host-device transfers included", ["device"],
    buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60), registry=CORE)
CALLS_IN_FLIGHT = Gauge("xlacs_calls_in_flight", "Calls admitted by an RPC's gate, waiting or running, whatever "
                        "their stage (parsing, waiting for a slot, compiling, executing)", ["rpc"], registry=CORE)
QUEUE_SECONDS = Histogram(
    "xlacs_queue_seconds", "Time a call waited for a slot of its RPC's gate (max_concurrent_compiles, "
    "max_concurrent_executes)", ["rpc"],
    buckets=(0.001, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300), registry=CORE)
IN_FLIGHT = Gauge("xlacs_in_flight", "Compiles and executions running now, by device", ["device", "activity"],
                  registry=CORE)
LOWERING_ERRORS = Counter("xlacs_lowering_errors_total", "Nodes whose lowering failed unexpectedly (a bug of "
                          "xlacs, answered INTERNAL)", ["op"], registry=CORE)
RPC_ERRORS = Counter("xlacs_rpc_errors_total", "RPCs that ended with an error status", ["method", "code"],
                     registry=CORE)


@contextlib.contextmanager
def compiling(device: str, stage_ms: dict[str, float]):
    """Counts a compile in flight on `device`; when it succeeds, observes each stage of `stage_ms`."""
    with IN_FLIGHT.labels(device, "compile").track_inprogress():
        yield
    for stage, ms in stage_ms.items():
        COMPILE_SECONDS.labels(stage).observe(ms / 1e3)


@contextlib.contextmanager
def executing(device: str):
    """Counts an execution in flight on `device` and observes its seconds (one context, not prometheus' two: a
    tiny Execute's metrics cost more than its program, issue 17)."""
    in_flight, seconds = _executing(device)
    in_flight.inc()
    start = time.perf_counter()
    try:
        yield
    finally:
        seconds.observe(time.perf_counter() - start)
        in_flight.dec()


@functools.cache
def _executing(device: str):
    """The children of a device's execute metrics, made once: labels() costs more than the count (issue 17)."""
    return IN_FLIGHT.labels(device, "execute"), EXECUTE_SECONDS.labels(device)


def in_flight(device: str, activity: str) -> int:
    return int(CORE.get_sample_value("xlacs_in_flight", {"device": device, "activity": activity}) or 0)


def calls_in_flight() -> int:
    """Compile, CheckGraph and Execute calls admitted and not yet done, in this process."""
    return int(sum(s.value for family in CALLS_IN_FLIGHT.collect() for s in family.samples))


@dataclasses.dataclass(frozen=True)
class DeviceMemory:
    in_use_bytes: int
    limit_bytes: int | None
    peak_bytes: int | None  # the most in use at once, where PJRT reports it
    source: str  # "pjrt": the device's allocator; "host": a CPU device, whose memory is this process's RAM


def device_memory(device) -> DeviceMemory | None:
    """A device's memory as PJRT reports it; for CPU devices (PJRT reports nothing) this process's RSS."""
    stats = device.device.memory_stats()
    if stats:
        return DeviceMemory(int(stats.get("bytes_in_use", 0)), stats.get("bytes_limit"),
                            stats.get("peak_bytes_in_use"), "pjrt")
    if device.platform != "cpu":
        return None
    page = os.sysconf("SC_PAGE_SIZE")
    try:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * page
    except OSError:  # not Linux
        return None
    return DeviceMemory(rss, os.sysconf("SC_PHYS_PAGES") * page, None, "host")


class ServiceCollector:
    """Reads one service (service.py) when scraped: its cache tiers, counters and device memory."""

    def __init__(self, service):
        self.service = service

    def collect(self):
        c = self.service.counters
        build = GaugeMetricFamily("xlacs_build_info", "Versions of xlacs and its runtime",
                                  labels=["version", "jax", "jaxlib"])
        build.add_metric([version.VERSION, jax.__version__, jaxlib.__version__], 1)
        yield build
        yield GaugeMetricFamily("xlacs_start_time_seconds", "When the service started, in unix time",
                                value=c.started)
        yield CounterMetricFamily("xlacs_rpc_requests", "RPCs received", value=c.requests)
        yield CounterMetricFamily("xlacs_compiles", "Compiles that missed every cache tier", value=c.compiles)
        yield CounterMetricFamily("xlacs_executes", "Executions that succeeded", value=c.executes)
        yield CounterMetricFamily("xlacs_bucket_compiles", "XLA compiles of a shape bucket of a feed with unknown "
                                  "dims (docs/dynamic_shapes.md)", value=c.bucket_compiles)
        yield CounterMetricFamily("xlacs_padding_elements", "Zeros added to inputs with unknown dims to reach their "
                                  "bucket", value=c.padding_elements)
        yield CounterMetricFamily("xlacs_padded_elements", "Elements of the inputs with unknown dims, as padded to "
                                  "their bucket", value=c.padded_elements)
        workers = CounterMetricFamily("xlacs_execution_workers", "Execution workers started, killed at a "
                                      "deadline, or dead of a crash", labels=["device", "event"])
        for pool in self.service.workers.pools():
            for event in ("started", "killed", "crashed"):
                workers.add_metric([pool.device.name, event], getattr(pool, event))
        yield workers
        weights = self.service.weights
        yield GaugeMetricFamily("xlacs_weight_bytes", "Device-resident weight bytes of the loaded executables "
                                                      "(bounded by max_weight_bytes)", value=weights.resident_bytes())
        yield CounterMetricFamily("xlacs_weight_evictions", "Loaded executables dropped, least recently used "
                                                            "first, to stay within max_loaded and max_weight_bytes",
                                  value=weights.evictions)
        yield from self._resident()
        states, state_bytes = self.service.states.totals()
        yield GaugeMetricFamily("xlacs_states", "Variable states: models trained on the device (bounded by "
                                                "max_states)", value=states)
        yield GaugeMetricFamily("xlacs_state_bytes", "Bytes of the variable states' variables (bounded by "
                                                     "max_state_bytes)", value=state_bytes)
        yield from self._shared_memory()
        yield from self._tiers()
        yield from self._blobs()
        yield from self._memory()

    def _resident(self):
        """Outputs kept on the device under handles (docs/data_plane.md, Resident outputs)."""
        resident = self.service.resident
        tensors, size = resident.totals()
        yield GaugeMetricFamily("xlacs_resident_tensors", "Outputs kept on the device under handles (bounded by "
                                                          "max_resident_tensors)", value=tensors)
        yield GaugeMetricFamily("xlacs_resident_bytes", "Bytes of the resident tensors (bounded by "
                                                        "max_resident_bytes)", value=size)
        released = CounterMetricFamily("xlacs_resident_released", "Resident tensors freed by FreeTensors, or "
                                                                  "when their time to live ran out", labels=["how"])
        released.add_metric(["freed"], resident.freed)
        released.add_metric(["expired"], resident.expired)
        yield released

    def _shared_memory(self):
        """Sessions and the clients' shared-memory regions mapped under them (docs/data_plane.md, Shared memory)."""
        sessions, regions, size = self.service.shared_memory.totals()
        yield GaugeMetricFamily("xlacs_shared_memory_sessions", "Open sessions (OpenSession calls; bounded by "
                                                                "max_sessions)", value=sessions)
        yield GaugeMetricFamily("xlacs_shared_memory_regions", "Clients' shared-memory regions mapped (bounded by "
                                                               "max_session_regions per session)", value=regions)
        yield GaugeMetricFamily("xlacs_shared_memory_bytes", "Bytes of the mapped regions", value=size)

    def _tiers(self):
        yield from _tier_families("xlacs_cache", "Cache", [(t.tier, t.stats) for t in self.service.tiers], {
            "entries": (GaugeMetricFamily, "entries", "Entries in a cache tier"),
            "bytes": (GaugeMetricFamily, "bytes", "Bytes held by a cache tier"),
            "evictions": (CounterMetricFamily, "evictions", "Entries evicted"),
            "errors": (CounterMetricFamily, "errors", "Failures of a cache tier's backend (Redis unreachable, an I/O "
                                                      "error)"),
            "rejected": (CounterMetricFamily, "integrity_errors", "Entries refused as misses: truncated, corrupt, "
                                                                  "another format version, or a bad HMAC"),
            "skipped": (CounterMetricFamily, "skipped", "Lookups and writes that went on without a failing backend "
                                                        "while its circuit breaker was open"),
        })
        saved = CounterMetricFamily("xlacs_cache_compile_seconds_saved", "Lowering and compile time that cache "
                                                                         "hits saved", labels=["tier"])
        for t in self.service.tiers:
            saved.add_metric([t.tier], t.stats.compile_ms_saved / 1e3)
        yield saved

    def _blobs(self):
        """Content-addressed blobs and graph manifests (docs/cache.md, Blobs), and what clients sent or spared."""
        stores = [(s.tier, s.stats) for s in self.service.blobs.stores]
        yield from _tier_families("xlacs_blob", "Blob and graph manifest", stores, {
            "entries": (GaugeMetricFamily, "entries", "Blobs and graph manifests in a tier (Redis: those this "
                                                      "replica wrote)"),
            "bytes": (GaugeMetricFamily, "bytes", "Bytes of blobs and graph manifests held by a tier"),
            "evictions": (CounterMetricFamily, "evictions", "Blobs evicted"),
            "rejected": (CounterMetricFamily, "integrity_errors", "Blobs whose bytes did not hash to their digest, "
                                                                  "and manifests that did not hold: misses, deleted"),
        })
        c = self.service.counters
        received = CounterMetricFamily("xlacs_received_bytes", "Request bytes received, by RPC", labels=["rpc"])
        for rpc, size in c.received().items():
            received.add_metric([rpc], size)
        yield received
        yield CounterMetricFamily("xlacs_upload_saved_bytes", "Bytes of the blobs FindMissingBlobs found here "
                                                              "already: what clients did not upload",
                                  value=c.upload_saved_bytes)

    def _memory(self):
        used = GaugeMetricFamily("xlacs_device_memory_used_bytes", "Memory in use on a device (for a CPU "
                                                                   "device: this process's RSS)", labels=["device"])
        limit = GaugeMetricFamily("xlacs_device_memory_limit_bytes", "Memory a device can use (for a CPU "
                                                                     "device: the host's RAM)", labels=["device"])
        peak = GaugeMetricFamily("xlacs_device_memory_peak_bytes", "The most memory in use on a device at once, "
                                                                   "where PJRT reports it", labels=["device"])
        budget = GaugeMetricFamily("xlacs_device_budget_bytes", "A device's budget for what the daemon keeps on it "
                                                                "(max_device_bytes)", labels=["device"])
        counted = GaugeMetricFamily("xlacs_device_budget_used_bytes", "Bytes counted against a device's budget, "
                                                                      "by kind: weights, resident (tensors), states",
                                    labels=["device", "kind"])
        for d in self.service.devices.all:
            memory = device_memory(d)
            if memory is not None:
                used.add_metric([d.name], memory.in_use_bytes)
                if memory.limit_bytes is not None:
                    limit.add_metric([d.name], memory.limit_bytes)
                if memory.peak_bytes is not None:
                    peak.add_metric([d.name], memory.peak_bytes)
            budget.add_metric([d.name], self.service.budget.limits[d.name])
            for kind, size in self.service.budget.used(d.name).items():
                counted.add_metric([d.name, kind], size)
        yield from (used, limit, peak, budget, counted)


def _tier_families(prefix: str, what: str, tiers: list, fields: dict):
    """`prefix`_requests{tier,result} and a family per TierStats field of `fields` (field -> (family class,
    name suffix, help)) over (tier name, stats) pairs."""
    requests = CounterMetricFamily(f"{prefix}_requests", f"{what} lookups by tier and result",
                                   labels=["tier", "result"])
    families = {field: family(f"{prefix}_{name}", help, labels=["tier"])
                for field, (family, name, help) in fields.items()}
    for tier, stats in tiers:
        requests.add_metric([tier, "hit"], stats.hits)
        requests.add_metric([tier, "miss"], stats.misses)
        for field, family in families.items():
            family.add_metric([tier], getattr(stats, field))
    yield requests
    yield from families.values()


def registry_for(service) -> CollectorRegistry:
    """What /metrics exposes for `service`: the process's core metrics and the service's own state."""
    registry = CollectorRegistry()
    registry.register(CORE)
    registry.register(ServiceCollector(service))
    return registry
