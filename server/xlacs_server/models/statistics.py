"""Per-model-version statistics: Triton's ModelStatistics for the protocol's stats endpoints, Prometheus series for
/metrics and the recent latencies the dashboard's models page shows.

Requests arrive on many threads (REST, gRPC, the batcher's), so the counts are kept under one lock; Prometheus'
children count on their own. The series live in metrics.CORE with labels model and version: a version that is
reloaded holds them through both of its ServedModels, so they go only when the last holder closes.
"""
from __future__ import annotations

import collections
import statistics as stats
import threading
import time

from prometheus_client import Counter, Histogram

from xlacs_server import metrics
from xlacs_server.execute.executable import RunTimes

_SECONDS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60)
REQUESTS = Counter("xlacs_model_requests", "Inference requests a model version answered", ["model", "version"],
                   registry=metrics.CORE)
FAILURES = Counter("xlacs_model_failures", "Inference requests a model version failed (bad input, unavailable, "
                   "queue full, deadline, execution error)", ["model", "version"], registry=metrics.CORE)
QUEUE_SECONDS = Histogram("xlacs_model_queue_seconds", "Time an answered request waited: in the dynamic batcher's "
                          "queue, or for an execute slot", ["model", "version"], buckets=_SECONDS,
                          registry=metrics.CORE)
COMPUTE_SECONDS = Histogram("xlacs_model_compute_seconds", "Time an answered request's run took: its inputs onto "
                            "the device, the executable, its outputs back",
                            ["model", "version"], buckets=_SECONDS, registry=metrics.CORE)
BATCH_SIZE = Histogram("xlacs_model_batch_size", "Rows of each run of a model version's executable (the dynamic "
                       "batcher merges requests)", ["model", "version"],
                       buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), registry=metrics.CORE)
_FAMILIES = (REQUESTS, FAILURES, QUEUE_SECONDS, COMPUTE_SECONDS, BATCH_SIZE)

_holders: collections.Counter[tuple[str, str]] = collections.Counter()  # ModelStatistics per (model, version)
_holders_lock = threading.Lock()

RECENT = 1000  # requests whose latency the quantiles cover
# Triton's split of a run (RunTimes): the inputs onto the device, the executable, the outputs back to the host.
COMPUTE = ("compute_input", "compute_infer", "compute_output")


def _duration() -> dict[str, int]:
    return {"count": 0, "ns": 0}


def _add(duration: dict[str, int], seconds: float) -> None:
    duration["count"] += 1
    duration["ns"] += int(seconds * 1e9)


def _add_times(durations: dict[str, dict[str, int]], times: RunTimes) -> None:
    for kind, seconds in zip(COMPUTE, (times.input_s, times.infer_s, times.output_s)):
        _add(durations[kind], seconds)


class ModelStatistics:
    """What one model version did: requests answered and failed, their queue and compute times, the runs of its
    executable by batch size."""

    def __init__(self, name: str, version: str):
        self.name, self.version = name, version
        self.last_error = ""
        self._lock = threading.Lock()
        self._last_inference_ms = 0
        self._inference_count = 0
        self._execution_count = 0
        self._stats = {kind: _duration() for kind in ("success", "fail", "queue", *COMPUTE)}
        self._batches: dict[int, dict[str, int]] = {}
        self._latencies: collections.deque[float] = collections.deque(maxlen=RECENT)
        labels = (name, version)
        with _holders_lock:
            _holders[labels] += 1
            self._requests, self._failures, self._queue, self._compute, self._batch_size = (
                family.labels(*labels) for family in _FAMILIES)
        self._closed = False

    def success(self, queue_s: float, times: RunTimes) -> None:
        """One request answered after `queue_s` waiting and the run of `times` (its batch's)."""
        with self._lock:
            self._last_inference_ms = int(time.time() * 1e3)
            _add(self._stats["success"], queue_s + times.total_s)
            _add(self._stats["queue"], queue_s)
            _add_times(self._stats, times)
            self._latencies.append(queue_s + times.total_s)
        self._requests.inc()
        self._queue.observe(queue_s)
        self._compute.observe(times.total_s)

    def failure(self, seconds: float, message: str = "") -> None:
        """One request failed after `seconds`; `message` (the error's) becomes last_error."""
        with self._lock:
            self._last_inference_ms = int(time.time() * 1e3)
            _add(self._stats["fail"], seconds)
            if message:
                self.last_error = message
        self._failures.inc()

    def execution(self, batch_size: int, times: RunTimes) -> None:
        """One run of the executable on `batch_size` rows (1 for a model without a batch dim)."""
        with self._lock:
            self._execution_count += 1
            self._inference_count += batch_size
            _add_times(self._batches.setdefault(batch_size, {kind: _duration() for kind in COMPUTE}), times)
        self._batch_size.observe(batch_size)

    def snapshot(self) -> dict:
        """Triton's ModelStatistics as its JSON (field names as in grpc_service.proto, so that
        json_format.ParseDict makes the gRPC message of it). inference_count counts rows, as Triton's does."""
        with self._lock:
            return {
                "name": self.name, "version": self.version,
                "last_inference": self._last_inference_ms,
                "inference_count": self._inference_count, "execution_count": self._execution_count,
                "inference_stats": {kind: dict(d) for kind, d in self._stats.items()},
                "batch_stats": [{"batch_size": size, **{kind: dict(b[kind]) for kind in COMPUTE}}
                                for size, b in sorted(self._batches.items())],
            }

    def latency_quantiles(self) -> dict[str, float] | None:
        """p50 and p99 in seconds of the last RECENT answered requests (queue and compute); None before any."""
        with self._lock:
            latencies = list(self._latencies)
        if not latencies:
            return None
        if len(latencies) == 1:
            return {"p50": latencies[0], "p99": latencies[0]}
        cuts = stats.quantiles(latencies, n=100, method="inclusive")
        return {"p50": cuts[49], "p99": cuts[98]}

    def close(self) -> None:
        """Drops the version's Prometheus series (the model is unloaded) unless another ServedModel of the same
        version (a reload) still holds them. Idempotent."""
        with _holders_lock:
            if self._closed:
                return
            self._closed = True
            labels = (self.name, self.version)
            _holders[labels] -= 1
            if _holders[labels] == 0:
                del _holders[labels]
                for family in _FAMILIES:
                    family.remove(*labels)
