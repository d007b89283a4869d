"""One served model version: its signatures compiled at load through the service's cache (models/served_signature.py:
every batch bucket of a batching one, so that no request waits for a compile and a restarted replica loads from the
shared tier), then run by name with its inputs checked. Every API serves the signature the config names (the main
one); TF Serving's Predict serves a SavedModel's others too, compiled at the same load."""
from __future__ import annotations

import contextlib
import logging
import pathlib
import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from xlacs_server.errors import Unavailable, XlacsError
from xlacs_server.models.v2 import model_config_pb2
from xlacs_server.models import datatypes, source
from xlacs_server.models.served_signature import ServedSignature, TensorMetadata
from xlacs_server.models.statistics import ModelStatistics

if TYPE_CHECKING:
    from xlacs_server.buckets.dynamic import DynamicExecutables
    from xlacs_server.service import CompilationService

log = logging.getLogger(__name__)

LOADING, READY, UNAVAILABLE, UNLOADING = "LOADING", "READY", "UNAVAILABLE", "UNLOADING"  # Triton's words


def ready(model):
    """`model`, READY: its inputs and outputs are known. Unavailable with its state and reason otherwise."""
    if model.state != READY:
        raise Unavailable(f"{model!r} is {model.state}" + (f": {model.reason}" if model.reason else ""))
    return model


class ServedModel:
    def __init__(self, service: CompilationService, dynamic: DynamicExecutables, version_dir: pathlib.Path,
                 config: model_config_pb2.ModelConfig):
        self.name, self.version = config.name or version_dir.parent.name, version_dir.name
        self.state, self.reason = LOADING, ""
        self.config = config
        self.platform = config.platform
        self.max_batch_size = config.max_batch_size
        self.inputs: list[TensorMetadata] = []  # the main signature's
        self.outputs: list[TensorMetadata] = []
        self.failure: Exception | None = None  # why the load failed (UNAVAILABLE)
        self.statistics = ModelStatistics(self.name, self.version)  # of every signature's requests
        self.signatures: dict[str, ServedSignature] = {}  # by key: the main one, and a SavedModel's others served
        self.refused: dict[str, Exception] = {}  # a SavedModel's other signatures that are not served, and why
        self._service = service
        self._dynamic = dynamic
        self._version_dir = version_dir
        self._source: source.Source | None = None
        self._main: ServedSignature | None = None
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
        self._source = found = source.read(self._version_dir, self.config, self._service.settings.max_graph_bytes)
        self.config, self.platform = found.config, found.config.platform
        self.max_batch_size = found.config.max_batch_size
        self._main = self._compile(found, repr(self), f"{self.name}/{self.version}")
        self.inputs, self.outputs = self._main.inputs, self._main.outputs
        configured = {o.name for o in self.config.output}
        self.config.output.extend(model_config_pb2.ModelOutput(
            name=o.name, data_type=datatypes.to_config(o.datatype), dims=o.shape[1 if self.max_batch_size else 0:])
            for o in self.outputs if o.name not in configured)
        self.signatures = {found.signature_key: self._main}
        for key, other in found.others.items():
            try:
                if isinstance(other, Exception):
                    raise other
                self.signatures[key] = self._compile(other, f"{self!r} signature {key!r}",
                                                     f"{self.name}/{self.version}/{key}")
            except Exception as e:  # the main signature serves on; a Predict on this one says why it cannot
                log.warning("%r: signature %r is not served: %s", self, key, e, exc_info=not isinstance(e, XlacsError))
                self.refused[key] = e
        if found.others:
            log.info("%r: TF Serving's Predict serves signature(s) %s besides %r", self,
                     ", ".join(map(repr, self.signatures.keys() - {found.signature_key})) or "none", found.signature_key)

    def _compile(self, found: source.Source, label: str, graph_name: str) -> ServedSignature:
        served = ServedSignature(self._service, self._dynamic, found, label=label, graph_name=graph_name,
                                 statistics=self.statistics)
        served.compile(self.config.dynamic_batching if self.config.HasField("dynamic_batching") else None)
        return served

    @property
    def batcher(self):
        """The main signature's dynamic batcher (None without one)."""
        return self._main.batcher if self._main is not None else None

    @property
    def signature(self) -> source.Source:
        """The version's files as read at load: the main signature (its key, and the graph's tensor of each input
        and output) and a SavedModel's SignatureDefs, for the front ends that speak of signatures (tfserving/)."""
        return ready(self)._source

    # --- Infer -----------------------------------------------------------------------------------

    def infer(self, inputs: dict[str, np.ndarray], outputs: list[str] | None, context,
              signature: str | None = None) -> dict[str, np.ndarray]:
        """The requested outputs (all when None) by name, of the main signature or the one served by that key.
        `context` has time_remaining() and is_active(), as a gRPC ServicerContext does: its deadline and cancellation
        stop the request while it waits."""
        start = time.perf_counter()
        try:
            with self._request():
                served = self._main if signature is None else self.signatures[signature]
                wanted = served.wanted(outputs)
                served.check(inputs)
                if served.batcher is not None:
                    with self._service.gates.batched:
                        results, queue_s, times = served.batcher.infer(inputs, context)
                else:
                    results, times = self._service.gates.execute.run(context, lambda call: served.run_in(inputs, call))
                    queue_s = max(0.0, time.perf_counter() - start - times.total_s)
        except Exception as e:
            self.statistics.failure(time.perf_counter() - start, str(e))
            raise
        self.statistics.success(queue_s, times)
        return {name: results[name] for name in wanted}

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
        """UNLOADING: no new request; those in flight get up to `grace_s` to finish, then the batchers fail what they
        still queue and the model's metrics go (models/statistics.py keeps those a new load of it holds too)."""
        with self._lock:
            self.state = UNLOADING
            self._lock.wait_for(lambda: self._in_flight == 0, timeout=grace_s)
        for served in self.signatures.values():
            if served.batcher is not None:
                served.batcher.close()
        self.statistics.close()
