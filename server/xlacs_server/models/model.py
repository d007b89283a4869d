"""One served model version: compiled at load through the service's cache (every batch bucket of a batching model,
so that no request waits for a compile and a restarted replica loads from the shared tier), then run by name with
its inputs checked against the config."""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import pathlib
import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from xlacs_server.batching.dynamic_batcher import DynamicBatcher
from xlacs_server.buckets.routed import execute_routed
from xlacs_server.buckets.sizes import bucket_sizes
from xlacs_server.errors import InvalidRequest, NotFound, Unavailable
from xlacs_server.execute.executable import RunTimes
from xlacs_server.gates import Call
from xlacs_server.models.v2 import model_config_pb2
from xlacs_server.models import datatypes, source
from xlacs_server.models.statistics import ModelStatistics
from xlacs_server.pipeline.request import CompileSpec

if TYPE_CHECKING:
    from xlacs_server.buckets.dynamic import DynamicExecutables
    from xlacs_server.pipeline.request import CompileResult
    from xlacs_server.service import CompilationService

log = logging.getLogger(__name__)

LOADING, READY, UNAVAILABLE, UNLOADING = "LOADING", "READY", "UNAVAILABLE", "UNLOADING"  # Triton's words


def ready(model):
    """`model`, READY: its inputs and outputs are known. Unavailable with its state and reason otherwise."""
    if model.state != READY:
        raise Unavailable(f"{model!r} is {model.state}" + (f": {model.reason}" if model.reason else ""))
    return model


@dataclasses.dataclass(frozen=True)
class TensorMetadata:
    name: str
    datatype: str
    shape: tuple[int, ...]  # -1 for the batch dim


class Background:
    """The context of work no client waits for (a load, a batch the batcher runs): no deadline of a client, never
    cancelled; the server's own limits still apply."""

    @staticmethod
    def time_remaining() -> None:
        return None

    @staticmethod
    def is_active() -> bool:
        return True


class ServedModel:
    def __init__(self, service: CompilationService, dynamic: DynamicExecutables, version_dir: pathlib.Path,
                 config: model_config_pb2.ModelConfig):
        self.name, self.version = config.name or version_dir.parent.name, version_dir.name
        self.state, self.reason = LOADING, ""
        self.config = config
        self.platform = config.platform
        self.max_batch_size = config.max_batch_size
        self.inputs: list[TensorMetadata] = []
        self.outputs: list[TensorMetadata] = []
        self.failure: Exception | None = None  # why the load failed (UNAVAILABLE)
        self.statistics = ModelStatistics(self.name, self.version)
        self.batcher: DynamicBatcher | None = None  # a config with dynamic_batching has one
        self._service = service
        self._dynamic = dynamic
        self._version_dir = version_dir
        self._source: source.Source | None = None
        self._spec: CompileSpec | None = None
        self._executable_id = ""
        self._in_flight = 0
        self._lock = threading.Condition()

    def __repr__(self) -> str:
        return f"model {self.name!r} version {self.version}"

    # --- Load ------------------------------------------------------------------------------------

    def load(self) -> None:
        """Reads and compiles the version: READY, or UNAVAILABLE with the error's message as reason (raised on)."""
        start = time.perf_counter()
        try:
            self._load()
        except Exception as e:
            self.state, self.reason, self.failure = UNAVAILABLE, str(e) or type(e).__name__, e
            log.warning("%r failed to load: %s", self, self.reason)
            raise
        self.state = READY
        log.info("%r is ready (%s, max_batch_size %d) in %.1f s", self, self.platform, self.max_batch_size,
                 time.perf_counter() - start)

    def _load(self) -> None:
        settings = self._service.settings
        self._source = found = source.read(self._version_dir, self.config, settings.max_graph_bytes)
        self.config, self.platform = found.config, found.config.platform
        self.max_batch_size = found.config.max_batch_size
        batch = (-1,) if self.max_batch_size else ()
        feeds = [(b.tensor, datatypes.to_tf(datatypes.from_numpy(b.dtype)), batch + b.dims) for b in found.inputs]
        sizes = bucket_sizes(self._batch_buckets(), settings.max_bucket_size) if self.max_batch_size else ()
        self._spec = CompileSpec(found.graph_def, feeds, [b.tensor for b in found.outputs],
                                 graph_name=f"{self.name}/{self.version}", bucket_sizes=sizes)
        compiled = self._compile_executable(Background())
        if len(compiled.inputs) != len(feeds):
            raise InvalidRequest(f"{self!r}: the graph reads variables besides its inputs "
                                 f"({', '.join(s.name for s in compiled.inputs[len(feeds):])}): freeze it")
        for bucket in sizes:
            self._warm(bucket)
        self.inputs = [TensorMetadata(b.name, datatypes.from_numpy(b.dtype), batch + b.dims) for b in found.inputs]
        self.outputs = self._served_outputs(compiled.outputs[:len(found.outputs)])
        if self.config.HasField("dynamic_batching"):
            self.batcher = self._batcher()

    @property
    def signature(self) -> source.Source:
        """The version's files as read at load: the signature served (its key, and the graph's tensor of each input
        and output) and a SavedModel's SignatureDefs, for the front ends that speak of signatures (tfserving/)."""
        return ready(self)._source

    def _batch_buckets(self) -> tuple[int, ...]:
        """The batch sizes compiled: the powers of two below max_batch_size, and it."""
        return tuple(1 << i for i in range(self.max_batch_size.bit_length()) if 1 << i < self.max_batch_size) + \
            (self.max_batch_size,)

    def _compile_executable(self, context):
        """The executable (static) or dynamic executable (batching) of the version; its id is kept for infer."""
        call = self._compile_call(context)
        if self.max_batch_size:
            compiled, cache, _ = self._dynamic.compile(self._spec, call.checkpoint, call.slot)
        else:
            result = self._service.compile(self._spec, call.checkpoint, call.slot)
            compiled, cache = result.loaded, result.cache
        self._executable_id = compiled.id
        log.info("%r: executable %s (%s)", self, compiled.id, cache)
        return compiled

    def _compile_call(self, context) -> Call:
        """A compile that takes one of the daemon's compile slots (not a place in its queue: a load must not fail
        because clients keep the queue busy), bounded by compile_deadline_s."""
        settings = self._service.settings
        return Call(context, self._service.gates.compile, settings.compile_deadline_s, "compile_deadline_s")

    def _compile_bucket(self, spec: CompileSpec, context) -> CompileResult:
        call = self._compile_call(context)
        return self._service.compile(spec, call.checkpoint, call.slot)

    def _warm(self, bucket: int) -> None:
        """Compiles (or loads from the cache) the executable of one batch bucket."""
        start = time.perf_counter()
        caches = []

        def compile(spec):
            result = self._compile_bucket(spec, Background())
            caches.append(result.cache)
            return result
        zeros = {b.tensor: np.zeros((bucket, *b.dims), b.dtype) for b in self._source.inputs}
        self._dynamic.route(self._executable_id, zeros, compile)
        log.info("%r: batch bucket %d ready (%s) in %.0f ms", self, bucket, caches[0] if caches else "loaded",
                 (time.perf_counter() - start) * 1e3)

    def _served_outputs(self, compiled) -> list[TensorMetadata]:
        """The outputs' metadata from the executable, checked against the config's outputs, which are filled in
        where it leaves them out."""
        outputs = []
        for binding, sig in zip(self._source.outputs, compiled):
            shape = tuple(sig.shape)
            if self.max_batch_size and (not shape or shape[0] != -1):
                raise InvalidRequest(f"{self!r}: output {binding.name!r} has shape {list(shape)}, whose first dim "
                                     "does not follow the batch dim: set max_batch_size 0")
            datatype = datatypes.from_numpy(sig.dtype)
            dims = shape[1:] if self.max_batch_size else shape
            if binding.dtype is not None and binding.dtype != sig.dtype:
                raise InvalidRequest(f"{self!r}: output {binding.name!r} is {datatype}, the config says "
                                     f"{datatypes.from_numpy(binding.dtype)}")
            if binding.dims is not None and binding.dims != dims:
                raise InvalidRequest(f"{self!r}: output {binding.name!r} has dims {list(dims)}, the config says "
                                     f"{list(binding.dims)} (without the batch dim)")
            outputs.append(TensorMetadata(binding.name, datatype, shape))
        configured = {o.name for o in self.config.output}
        self.config.output.extend(model_config_pb2.ModelOutput(
            name=o.name, data_type=datatypes.to_config(o.datatype), dims=o.shape[1 if self.max_batch_size else 0:])
            for o in outputs if o.name not in configured)
        return outputs

    def _batcher(self) -> DynamicBatcher:
        batching = self.config.dynamic_batching
        return DynamicBatcher(self.run, name=f"{self.name}/{self.version}", max_batch_size=self.max_batch_size,
                              max_queue_delay_s=batching.max_queue_delay_microseconds / 1e6,
                              preferred_batch_sizes=tuple(batching.preferred_batch_size),
                              max_queue_size=batching.default_queue_policy.max_queue_size,
                              concurrency=self._service.gates.execute.slots)

    # --- Infer -----------------------------------------------------------------------------------

    def infer(self, inputs: dict[str, np.ndarray], outputs: list[str] | None, context) -> dict[str, np.ndarray]:
        """The requested outputs (all when None) by name. `context` has time_remaining() and is_active(), as a gRPC
        ServicerContext does: its deadline and cancellation stop the request while it waits."""
        start = time.perf_counter()
        try:
            with self._request():
                wanted = self._wanted(outputs)
                self._check(inputs)
                if self.batcher is not None:
                    with self._service.gates.batched:
                        results, queue_s, times = self.batcher.infer(inputs, context)
                else:
                    results, times = self._service.gates.execute.run(context, lambda call: self._run(inputs, call))
                    queue_s = max(0.0, time.perf_counter() - start - times.total_s)
        except Exception as e:
            self.statistics.failure(time.perf_counter() - start, str(e))
            raise
        self.statistics.success(queue_s, times)
        return {name: results[name] for name in wanted}

    def run(self, batch: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], RunTimes]:
        """The outputs of one run on `batch` (inputs by name, checked) and where its time went: what the batcher
        calls, in an execute slot taken outside the execute queue (the requests it merges were admitted already)."""
        return self._run(batch, Call(Background(), self._service.gates.execute, None, ""))

    def _run(self, batch: dict[str, np.ndarray], call: Call) -> tuple[dict[str, np.ndarray], RunTimes]:
        """(outputs by name, where the run's time went): the batch padded to its bucket, run in an execute slot."""
        feeds = {b.tensor: batch[b.name] for b in self._source.inputs}
        times = RunTimes()

        def execute():
            return execute_routed(self._dynamic, call, self._executable_id, feeds,
                                  lambda spec: self._compile_bucket(spec, call.context), times=times)
        try:
            _, results, _ = execute()
        except NotFound:  # the daemon dropped the executable (max_loaded): bound again, from the cache
            self._compile_executable(call.context)
            _, results, _ = execute()
        size = next(iter(batch.values())).shape[0] if self.max_batch_size else 1
        self.statistics.execution(size, times)
        return {b.name: out for b, out in zip(self._source.outputs, results)}, times

    def _wanted(self, outputs: list[str] | None) -> list[str]:
        names = [o.name for o in self.outputs]
        if outputs is None:
            return names
        unknown = [o for o in outputs if o not in names]
        if unknown:
            raise InvalidRequest(f"{self!r} has no output {unknown[0]!r}; its outputs are {names}")
        return list(outputs)

    def _check(self, inputs: dict[str, np.ndarray]) -> None:
        """InvalidRequest naming the first one that is missing, unknown, or of a datatype or shape the
        config does not take (a batch over max_batch_size too)."""
        expected = {m.name: m for m in self.inputs}
        for name in inputs:
            if name not in expected:
                raise InvalidRequest(f"{self!r} has no input {name!r}; its inputs are {list(expected)}")
        batch = None
        for name, meta in expected.items():
            if name not in inputs:
                raise InvalidRequest(f"input {name!r} is missing: {self!r} takes {list(expected)}")
            array = inputs[name]
            datatype = _datatype(array.dtype)
            if datatype != meta.datatype:
                raise InvalidRequest(f"input {name!r} has datatype {datatype}; {self!r} takes {meta.datatype}")
            if len(array.shape) != len(meta.shape) or any(m not in (d, -1) for d, m in zip(array.shape, meta.shape)):
                raise InvalidRequest(f"input {name!r} has shape {list(array.shape)}; {self!r} takes "
                                     f"{list(meta.shape)} (-1: the batch, 1 to max_batch_size {self.max_batch_size})")
            if self.max_batch_size:
                size = array.shape[0]
                if not 1 <= size <= self.max_batch_size:
                    raise InvalidRequest(f"input {name!r} has a batch of {size}; {self!r} takes 1 to "
                                         f"max_batch_size {self.max_batch_size}")
                if batch is not None and size != batch[1]:
                    raise InvalidRequest(f"inputs {batch[0]!r} and {name!r} have batches of {batch[1]} and {size}: "
                                         "every input of a request has the same batch size")
                batch = batch or (name, size)

    # --- Serving state ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _request(self):
        """A request in flight on a READY model; Unavailable otherwise."""
        with self._lock:
            ready(self)
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
                self._lock.notify_all()

    def unload(self, grace_s: float) -> None:
        """UNLOADING: no new request; those in flight get up to `grace_s` to finish, then the batcher fails what it
        still queues and the model's metrics go (models/statistics.py keeps those a new load of it holds too)."""
        with self._lock:
            self.state = UNLOADING
            self._lock.wait_for(lambda: self._in_flight == 0, timeout=grace_s)
        if self.batcher is not None:
            self.batcher.close()
        self.statistics.close()


def _datatype(dtype: np.dtype) -> str:
    try:
        return datatypes.from_numpy(dtype)
    except ValueError:
        return str(dtype)
