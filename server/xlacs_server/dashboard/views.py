"""The data behind each page, read from the live service. Each view is a FastAPI dependency returning a model."""
from __future__ import annotations

import collections
import dataclasses
import platform
import time
from typing import Annotated

import jax
import jaxlib
from fastapi import Depends, HTTPException, Path, Query, Request

from xlacs_server import errors as xlacs_errors
from xlacs_server import metrics, version
from xlacs_server.dashboard import models
from xlacs_server.dashboard.sampler import Sampler, hit_rates, rate
from xlacs_server.execute.device_budget import RESIDENT, STATES, WEIGHTS
from xlacs_server.lower import registry
from xlacs_server.lower.coverage import SEED_OPS
from xlacs_server.models.statistics import COMPUTE
from xlacs_server.passes.registry import record_fields

SEED_REFERENCE = f"TF 1.14's XLA kernels ({len(SEED_OPS)} ops)"
RATE_WINDOW_S = 60.0
HANDLE_PREFIX = 6  # characters of a resident tensor's handle shown: enough to tell them apart, too few to use


@dataclasses.dataclass
class Dashboard:
    """What the views read: the service and its sampled history."""
    service: object  # a CompilationService
    sampler: Sampler


def dashboard(request: Request) -> Dashboard:
    return request.app.state.dashboard


Dash = Annotated[Dashboard, Depends(dashboard)]
CacheKey = Annotated[str, Path(description="an executable's cache key (an executable id without its weights digest)")]


def overview(dash: Dash) -> models.Overview:
    service, history, latest = dash.service, dash.sampler.history(), dash.sampler.now()
    return models.Overview(
        devices=[_device(d, service.budget) for d in service.devices.all],
        versions=models.Versions(xlacs=version.VERSION, jax=jax.__version__, jaxlib=jaxlib.__version__,
                                 python=platform.python_version(),
                                 pjrt={d.platform: d.device.client.platform_version for d in service.devices.all}),
        started_unix=service.counters.started, uptime_s=latest.time - service.counters.started,
        totals=models.Totals(requests=latest.requests, errors=latest.errors, compiles=latest.compiles,
                             executes=latest.executes),
        rates=models.Rates(window_s=RATE_WINDOW_S, **{field: rate(history, latest, field, RATE_WINDOW_S)
                                                      for field in ("requests", "errors", "compiles", "executes")}))


def _device(d, budget) -> models.Device:
    memory = metrics.device_memory(d)
    compiles, executions = metrics.in_flight(d.name, "compile"), metrics.in_flight(d.name, "execute")
    counted = budget.used(d.name)
    return models.Device(name=d.name, platform=d.platform, kind=d.kind,
                         memory_used_bytes=memory.in_use_bytes if memory else None,
                         memory_limit_bytes=memory.limit_bytes if memory else None,
                         memory_source=memory.source if memory else None,
                         memory_peak_bytes=memory.peak_bytes if memory else None, budget_bytes=budget.limits[d.name],
                         budget_weights_bytes=counted[WEIGHTS], budget_resident_bytes=counted[RESIDENT],
                         budget_state_bytes=counted[STATES],
                         compiles_in_flight=compiles, executions_in_flight=executions, busy=compiles + executions > 0)


def ops(dash: Dash, q: Annotated[str, Query(max_length=200, description="part of an op or module name")] = "",
        device: Annotated[str, Query(pattern=f"^({'|'.join(registry.PLATFORMS)})?$",
                                     description="only the lowerings this platform uses; empty: all")] = "",
        ) -> models.Ops:
    platform_name = device or None
    graphs, nodes = collections.Counter(), collections.Counter()
    for executable in dash.service.tiers.l1.values():
        graphs.update(executable.op_histogram.keys())
        nodes.update(executable.op_histogram)
    registered = registry.registrations()
    needle = q.strip().lower()
    shown = [l for l in registered
             if (needle in l.op.lower() or needle in l.module.lower())
             and (platform_name is None or registry.lookup(l.op, platform_name) is l)]
    return models.Ops(query=q, device=platform_name, platforms=list(registry.PLATFORMS), registered=len(registered),
                      ops=[_op(l, graphs[l.op], nodes[l.op]) for l in shown], coverage=_coverage(platform_name))


def _op(l: registry.Lowering, graphs: int, nodes: int) -> models.Op:
    return models.Op(op=l.op, platform=l.platform, module=l.module, dtypes=sorted(str(d) for d in l.dtypes or ()),
                     devices=sorted(l.devices), attrs=sorted(l.attrs), graphs=graphs, nodes=nodes,
                     constant_inputs=l.constant_input_names)


def _coverage(platform_name: str | None) -> models.Coverage:
    platforms = [platform_name] if platform_name else registry.PLATFORMS
    covered, missing = [], []
    for op in SEED_OPS:
        (covered if any(registry.lookup(op, p) for p in platforms) else missing).append(op)
    return models.Coverage(reference=SEED_REFERENCE, device=platform_name, total=len(SEED_OPS), covered=covered,
                           missing=missing, percent=100.0 * len(covered) / len(SEED_OPS))


def cache(dash: Dash) -> models.Cache:
    history = dash.sampler.history()
    counters = dash.service.counters
    return models.Cache(
        interval_s=dash.sampler.interval_s,
        tiers=[_tier(models.Tier, t.stats, backend_errors=t.stats.errors,
                     compile_s_saved=t.stats.compile_ms_saved / 1e3) for t in dash.service.tiers],
        history=[models.TierHistory(tier=t.tier, points=[models.HitRatePoint(time_unix=when, hit_rate=r, lookups=n)
                                                         for when, r, n in hit_rates(history, t.tier)])
                 for t in dash.service.tiers],
        blob_tiers=[_tier(models.BlobTier, s.stats) for s in dash.service.blobs.stores],
        received_bytes=counters.received(), upload_saved_bytes=counters.upload_saved_bytes,
        shared_memory=models.SharedMemory(**dict(zip(("sessions", "regions", "bytes"),
                                                     dash.service.shared_memory.totals()))))


def _tier(model, s, **more):
    lookups = s.hits + s.misses
    return model(tier=s.tier, hits=s.hits, misses=s.misses, hit_rate=s.hits / lookups if lookups else None,
                 entries=s.entries, bytes=s.bytes, evictions=s.evictions, integrity_errors=s.rejected, **more)


def executables(dash: Dash) -> models.Executables:
    loaded = sorted(dash.service.tiers.l1.values(), key=lambda e: e.last_used or e.created, reverse=True)
    now = time.monotonic()
    return models.Executables(executables=[models.ExecutableSummary(**_summary(e)) for e in loaded], resident=[
        models.ResidentTensor(handle_prefix=t.handle[:HANDLE_PREFIX], executable_id=t.executable_id, output=t.output,
                              device=t.device, dtype=str(t.dtype), shape=list(t.shape), bytes=t.nbytes,
                              expires_in_s=max(0.0, t.expires - now)) for t in dash.service.resident.tensors()],
        states=[models.VariableState(id_prefix=s.id[:HANDLE_PREFIX], device=s.device.name, variables=len(s.variables),
                                     bytes=s.nbytes, steps=s.steps, created_unix=s.created,
                                     last_used_unix=s.last_used or None)
                for s in sorted(dash.service.states.states(), key=lambda s: s.last_used or s.created, reverse=True)])


def executable(dash: Dash, key: CacheKey) -> models.ExecutableDetail:
    e = _cached(dash, key)
    return models.ExecutableDetail(
        **_summary(e), passes=[record_fields(r) for r in e.passes], op_histogram=e.op_histogram,
        stablehlo_url=f"/api/executables/{e.key}/stablehlo", hlo_url=f"/api/executables/{e.key}/hlo",
        prepare_stablehlo_url=f"/api/executables/{e.key}/prepare/stablehlo" if e.prepare else None)


def _summary(e) -> dict:
    return dict(key=e.key, key_prefix=e.key[:12], graph_name=e.graph_name,
                device=e.device.name, inputs=[_spec(s) for s in e.inputs], outputs=[_spec(s) for s in e.outputs],
                stage_ms=e.stage_ms, compile_ms=sum(e.stage_ms.values()), tier=e.tier, size_bytes=e.size_bytes,
                hits=e.hits,
                prepare_size_bytes=len(e.prepare.serialized) if e.prepare else None,
                prepare_ms=e.prepare.ms if e.prepare else None,
                created_unix=e.created, last_used_unix=e.last_used or None)


def _spec(s) -> models.TensorSpec:
    return models.TensorSpec(name=s.name, dtype=str(s.dtype), shape=list(s.shape))


def _cached(dash: Dashboard, key: str):
    e = dash.service.tiers.l1.peek(key)
    if e is None:
        raise HTTPException(404, f"no executable with cache key {key!r} is in this server's memory cache")
    return e


def stablehlo_text(dash: Dash, key: CacheKey) -> tuple[str, str]:
    """(file name, text) of the StableHLO module that was compiled."""
    e = _cached(dash, key)
    return f"{e.key}.stablehlo.mlir", e.stablehlo


def prepare_stablehlo_text(dash: Dash, key: CacheKey) -> tuple[str, str]:
    """(file name, text) of the prepare program's StableHLO (the weight-only part, compile/prepare.py)."""
    e = _cached(dash, key)
    if e.prepare is None:
        raise HTTPException(404, f"executable {key!r} has no prepare program: nothing in it is computed from the "
                                 "weights alone")
    return f"{e.key}.prepare.stablehlo.mlir", e.prepare.stablehlo


def hlo_text(dash: Dash, key: CacheKey) -> tuple[str, str]:
    """(file name, text) of the HLO module after XLA's optimizations."""
    e = _cached(dash, key)
    return f"{e.key}.hlo.txt", e.compiled.as_text()


def errors(dash: Dash) -> models.Errors:
    counters = dash.service.counters
    return models.Errors(total=counters.errors, errors=[
        models.Error(time_unix=e["time"], request_id=e.get("request_id"), method=e["method"], code=e["code"],
                     message=e["message"]) for e in list(counters.recent_errors)])


def served_models(dash: Dash) -> models.ServedModels:
    repository = dash.service.models
    return models.ServedModels(repository=repository.source, ready=repository.ready,
                               versions=[_model_version(repository, v) for v in repository.index()])


def _model_version(repository, status) -> models.ModelVersion:
    """A version of the index with its statistics. A model that failed before any version (its config) has no
    version, and one unloaded since the index was read no statistics: both show the index's state and reason."""
    only_status = models.ModelVersion(name=status.name, version=status.version, state=status.state,
                                      reason=status.reason)
    if not status.version:
        return only_status
    try:
        served = repository.model(status.name, status.version)
    except (xlacs_errors.NotFound, xlacs_errors.Unavailable):
        return only_status
    s = served.statistics.snapshot()
    infer, quantiles = s["inference_stats"], served.statistics.latency_quantiles() or {}
    return models.ModelVersion(
        name=status.name, version=status.version, state=status.state, reason=status.reason,
        platform=served.platform, max_batch_size=served.max_batch_size,
        requests=infer["success"]["count"], failures=infer["fail"]["count"], last_error=served.statistics.last_error,
        last_inference_unix=s["last_inference"] / 1e3 or None, inference_count=s["inference_count"],
        execution_count=s["execution_count"], latency_p50_s=quantiles.get("p50"),
        latency_p99_s=quantiles.get("p99"), mean_queue_s=_mean_s(infer["queue"]),
        mean_compute_s=_mean_compute_s(infer),
        batch_sizes=[models.BatchSize(batch_size=b["batch_size"], executions=b["compute_infer"]["count"],
                                      mean_compute_s=_mean_compute_s(b)) for b in s["batch_stats"]])


def _mean_s(duration: dict[str, int]) -> float | None:
    """The mean seconds of a Triton StatisticDuration; None before any count."""
    return duration["ns"] / duration["count"] / 1e9 if duration["count"] else None


def _mean_compute_s(durations: dict[str, dict[str, int]]) -> float | None:
    """The mean seconds of a whole run: Triton's compute_input, compute_infer and compute_output together."""
    count = durations["compute_infer"]["count"]
    return sum(durations[kind]["ns"] for kind in COMPUTE) / count / 1e9 if count else None
