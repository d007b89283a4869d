"""One signature of a served version: its graph compiled at load through the service's cache (every batch bucket of a
batching signature, so that no request waits for a compile), its dynamic batcher, and the checks and run of a request
on it. A version serves the signature its config names to every API, and a SavedModel's others to TF Serving's
Predict (models/model.py)."""
from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

import numpy as np

from xlacs_server.batching.dynamic_batcher import DynamicBatcher
from xlacs_server.buckets.routed import execute_routed
from xlacs_server.buckets.sizes import bucket_sizes
from xlacs_server.errors import InvalidRequest, NotFound
from xlacs_server.execute.executable import RunTimes
from xlacs_server.gates import Call
from xlacs_server.models import datatypes
from xlacs_server.models.source import Source
from xlacs_server.models.statistics import ModelStatistics
from xlacs_server.pipeline.request import CompileSpec

if TYPE_CHECKING:
    from xlacs_server.buckets.dynamic import DynamicExecutables
    from xlacs_server.pipeline.request import CompileResult
    from xlacs_server.service import CompilationService

log = logging.getLogger(__name__)


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


class ServedSignature:
    def __init__(self, service: CompilationService, dynamic: DynamicExecutables, source: Source, *, label: str,
                 graph_name: str, statistics: ModelStatistics):
        self.key = source.signature_key
        self.source = source  # its graph and the graph's tensor of each input and output
        self.max_batch_size = source.config.max_batch_size
        self.label = label  # how messages name it: "model 'm' version 1", and the signature for another than the main
        self.inputs: list[TensorMetadata] = []
        self.outputs: list[TensorMetadata] = []
        self.batcher: DynamicBatcher | None = None  # a config with dynamic_batching has one per signature
        self._service, self._dynamic, self._statistics = service, dynamic, statistics
        self._graph_name = graph_name
        self.executable_id = ""  # bound again from the cache when the daemon dropped it (max_loaded)

    def __repr__(self) -> str:
        return self.label

    # --- Load ------------------------------------------------------------------------------------

    def compile(self, dynamic_batching) -> None:
        """Compiles the signature (each batch bucket of a batching one) and, for a batching one, starts its batcher
        where the config's `dynamic_batching` is given (None: no batcher); its inputs and outputs are known after."""
        found, settings = self.source, self._service.settings
        batch = (-1,) if self.max_batch_size else ()
        feeds = [(b.tensor, datatypes.to_tf(datatypes.from_numpy(b.dtype)), batch + b.dims) for b in found.inputs]
        sizes = bucket_sizes(self._batch_buckets(), settings.max_bucket_size) if self.max_batch_size else ()
        self._spec = CompileSpec(found.graph_def, feeds, [b.tensor for b in found.outputs],
                                 graph_name=self._graph_name, bucket_sizes=sizes)
        compiled = self._compile_executable(Background())
        if len(compiled.inputs) != len(feeds):
            raise InvalidRequest(f"{self!r}: the graph reads variables besides its inputs "
                                 f"({', '.join(s.name for s in compiled.inputs[len(feeds):])}): freeze it")
        for bucket in sizes:
            self._warm(bucket)
        self.inputs = [TensorMetadata(b.name, datatypes.from_numpy(b.dtype), batch + b.dims) for b in found.inputs]
        self.outputs = self._served_outputs(compiled.outputs[:len(found.outputs)])
        if dynamic_batching is not None and self.max_batch_size:
            self.batcher = DynamicBatcher(
                self.run, name=self.label, max_batch_size=self.max_batch_size,
                max_queue_delay_s=dynamic_batching.max_queue_delay_microseconds / 1e6,
                preferred_batch_sizes=tuple(dynamic_batching.preferred_batch_size),
                max_queue_size=dynamic_batching.default_queue_policy.max_queue_size,
                concurrency=self._service.gates.execute.slots)

    def _batch_buckets(self) -> tuple[int, ...]:
        """The batch sizes compiled: the powers of two below max_batch_size, and it."""
        return tuple(1 << i for i in range(self.max_batch_size.bit_length()) if 1 << i < self.max_batch_size) + \
            (self.max_batch_size,)

    def _compile_executable(self, context):
        """The executable (static) or dynamic executable (batching) of the signature; its id is kept for infer."""
        call = self._compile_call(context)
        if self.max_batch_size:
            compiled, cache, _ = self._dynamic.compile(self._spec, call.checkpoint, call.slot)
        else:
            result = self._service.compile(self._spec, call.checkpoint, call.slot)
            compiled, cache = result.loaded, result.cache
        self.executable_id = compiled.id
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
        zeros = {b.tensor: np.zeros((bucket, *b.dims), b.dtype) for b in self.source.inputs}
        self._dynamic.route(self.executable_id, zeros, compile)
        log.info("%r: batch bucket %d ready (%s) in %.0f ms", self, bucket, caches[0] if caches else "loaded",
                 (time.perf_counter() - start) * 1e3)

    def _served_outputs(self, compiled) -> list[TensorMetadata]:
        """The outputs' metadata from the executable, checked against the config's outputs (their dtype and dims
        where it gives them)."""
        outputs = []
        for binding, sig in zip(self.source.outputs, compiled):
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
        return outputs

    # --- Run -------------------------------------------------------------------------------------

    def run(self, batch: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], RunTimes]:
        """The outputs of one run on `batch` (inputs by name, checked) and where its time went: what the batcher
        calls, in an execute slot taken outside the execute queue (the requests it merges were admitted already)."""
        return self.run_in(batch, Call(Background(), self._service.gates.execute, None, ""))

    def run_in(self, batch: dict[str, np.ndarray], call: Call) -> tuple[dict[str, np.ndarray], RunTimes]:
        """(outputs by name, where the run's time went): the batch padded to its bucket, run in the execute slot of
        `call`."""
        feeds = {b.tensor: batch[b.name] for b in self.source.inputs}
        times = RunTimes()

        def execute():
            return execute_routed(self._dynamic, call, self.executable_id, feeds,
                                  lambda spec: self._compile_bucket(spec, call.context), times=times)
        try:
            _, results, _ = execute()
        except NotFound:  # the daemon dropped the executable (max_loaded): bound again, from the cache
            self._compile_executable(call.context)
            _, results, _ = execute()
        size = next(iter(batch.values())).shape[0] if self.max_batch_size else 1
        self._statistics.execution(size, times)
        return {b.name: out for b, out in zip(self.source.outputs, results)}, times

    def wanted(self, outputs: list[str] | None) -> list[str]:
        names = [o.name for o in self.outputs]
        if outputs is None:
            return names
        unknown = [o for o in outputs if o not in names]
        if unknown:
            raise InvalidRequest(f"{self!r} has no output {unknown[0]!r}; its outputs are {names}")
        return list(outputs)

    def check(self, inputs: dict[str, np.ndarray]) -> None:
        """InvalidRequest naming the first one that is missing, unknown, or of a datatype or shape the
        signature does not take (a batch over max_batch_size too)."""
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


def _datatype(dtype: np.dtype) -> str:
    try:
        return datatypes.from_numpy(dtype)
    except ValueError:
        return str(dtype)
