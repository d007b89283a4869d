"""Executables with unknown dims. A Compile derives their signature (buckets/signature.py) by shape inference at
two sizes, compiles nothing, and keeps its request by digest; an Execute goes to the executable of its bucket,
which the normal compile path (and cache) makes the first time a request needs it."""
from __future__ import annotations

import collections
import dataclasses
import threading
from typing import TYPE_CHECKING, Callable

import jax
import numpy as np

from xlacs import dtypes
from xlacs_server import unit
from xlacs_server.buckets import padding
from xlacs_server.buckets.signature import UNKNOWN, DynamicSignature, at_sizes, derive
from xlacs_server.buckets.sizes import bucket_sizes, probe_sizes
from xlacs_server.compile.cache_key import cache_key
from xlacs_server.digest import digest_of
from xlacs_server.errors import NotFound
from xlacs_server.graph import limits as graph_limits
from xlacs_server.graph.ir import Endpoint
from xlacs_server.lower.engine import argument_specs, build_program
from xlacs_server.passes.registry import run_pipeline
from xlacs_server.tensor_sig import TensorSig
from xlacs_server.unit.variables import INPUT_PREFIX as VARIABLE_PREFIX

from xlacs_server.pipeline.request import CompileResult, CompileSpec, Stopwatch, no_checkpoint, no_slot, within_limits

if TYPE_CHECKING:
    from xlacs_server.service import CompilationService


def has_unknown_dims(feeds) -> bool:
    return any(d == UNKNOWN for _, _, shape in feeds for d in shape)


@dataclasses.dataclass
class DynamicExecutable:
    """What the id of a Compile with unknown dims names: its request by digest, its bucket sizes, its signature,
    and the executable id of each bucket compiled so far (by the bucket of each unknown axis)."""
    id: str
    spec: CompileSpec
    sizes: tuple[int, ...]
    signature: DynamicSignature
    buckets: dict[tuple[int, ...], str] = dataclasses.field(default_factory=dict)

    @property
    def inputs(self) -> list[TensorSig]:
        return self.signature.inputs

    @property
    def outputs(self) -> list[TensorSig]:
        return self.signature.outputs


@dataclasses.dataclass(frozen=True)
class Route:
    """Where an Execute goes: the executable id and inputs to run, and what turns its outputs into the request's."""
    executable_id: str
    inputs: dict
    outputs: Callable[[list], list] = lambda outputs: outputs


class DynamicExecutables:
    """The dynamic executables of a service, least recently used dropped past max_loaded."""

    def __init__(self, service: CompilationService):
        self.service = service
        self.settings = service.settings
        self._known: collections.OrderedDict[str, DynamicExecutable] = collections.OrderedDict()
        self._lock = threading.Lock()

    @within_limits
    def compile(self, spec: CompileSpec, checkpoint: Callable[[str], None] = no_checkpoint,
                slot=no_slot) -> tuple[DynamicExecutable, str, dict[str, float]]:
        """(executable, cache, stage_ms) of a Compile whose feeds have unknown dims."""
        watch = Stopwatch(checkpoint, slot)
        dynamic, cache = self._compile(spec, watch)
        return dynamic, cache, watch.ms

    def _compile(self, spec: CompileSpec, watch: Stopwatch) -> tuple[DynamicExecutable, str]:
        """(the dynamic executable, "l1" if this daemon knew it or "miss"). Its id names the graph's digest, the
        feeds, fetches, bucket sizes, device and name; the first Compile infers its output shapes at two sizes
        (no XLA compile) in a compile slot."""
        sizes = bucket_sizes(spec.bucket_sizes, self.service.settings.max_bucket_size)
        device = self.service.devices.resolve(spec.device)
        digest = spec.graph_digest or digest_of(spec.graph_def)
        dynamic_id = cache_key([("graph_digest", str(digest)), ("feeds", repr(spec.feeds)),
                                ("fetches", repr(spec.fetches)), ("bucket_sizes", repr(sizes)),
                                ("device", device.name), ("graph_name", spec.graph_name),
                                # its buckets compile as the Compile asked: optimized at once, or tiered
                                *([("wait_optimized", "true")] if spec.wait_optimized else [])])
        with self._lock:
            known = self._known.get(dynamic_id)
            if known is not None:
                self._known.move_to_end(dynamic_id)
                return known, "l1"
        with watch.stage("resolve"):
            spec, graph_def = self.service.graph_of(dataclasses.replace(spec, graph_digest=digest))
        variables: list[TensorSig] = []  # inputs of an unfrozen graph's resource variables, of static shapes

        def probe(axis_sizes: dict[int, int]) -> list[TensorSig]:
            # Each import of the graph, a fresh decode budget: the probes read one request's GraphDef again
            with watch.stage("probe"), graph_limits.decode_budget(self.service.settings):
                feeds = [(name, dtype, at_sizes(shape, axis_sizes)) for name, dtype, shape in spec.feeds]
                compile_unit = unit.build(graph_def, feeds, spec.fetches, self.service.settings, device.platform)
                variables[:] = compile_unit.inputs[len(feeds):]
                graph, _ = run_pipeline(compile_unit.graph)
                program = build_program(graph, graph.platform)
                shapes = jax.eval_shape(program, *argument_specs(graph))
                names = [str(f) for f in graph.fetches] + [VARIABLE_PREFIX + name for name in program.assigned]
                return [TensorSig(n, np.dtype(s.dtype), tuple(s.shape)) for n, s in zip(names, shapes)]

        # Named as the compile unit names its inputs (`x` is `x:0`), which the bucket executables take.
        feeds = [TensorSig(str(Endpoint.parse(name)), dtypes.to_numpy(dtype), tuple(shape))
                 for name, dtype, shape in spec.feeds]
        with watch.slot():
            signature = derive(feeds, probe, *probe_sizes(sizes))
        signature = dataclasses.replace(signature, inputs=[*signature.inputs, *variables])
        dynamic = DynamicExecutable(dynamic_id, spec, sizes, signature)
        with self._lock:
            self._known[dynamic_id] = dynamic
            while len(self._known) > self.service.settings.max_loaded:
                self._known.popitem(last=False)
        return dynamic, "miss"

    def get(self, executable_id: str) -> DynamicExecutable | None:
        """The dynamic executable of an id, if it is one this daemon knows."""
        with self._lock:
            dynamic = self._known.get(executable_id)
            if dynamic is not None:
                self._known.move_to_end(executable_id)
        return dynamic

    def route(self, executable_id: str, given: dict, compile: Callable[[CompileSpec], CompileResult]) -> Route:
        """The Execute of `executable_id` as it runs: unchanged for a static executable; for a dynamic one, the
        inputs padded to their bucket, whose executable `compile(spec)` makes if this daemon has not loaded it,
        and the outputs sliced back."""
        dynamic = self.get(executable_id)
        if dynamic is None:
            return Route(executable_id, given)
        padded = padding.pad(dynamic.signature, given, dynamic.sizes)
        bucket_id = self._bucket(dynamic, padded.buckets, compile)
        self.service.counters.add(padding_elements=padded.padding_elements, padded_elements=padded.padded_elements)
        return Route(bucket_id, padded.inputs, lambda outputs: padding.unpad(dynamic.signature, outputs, padded.sizes))

    def _bucket(self, dynamic: DynamicExecutable, buckets: tuple[int, ...],
                compile: Callable[[CompileSpec], CompileResult]) -> str:
        """The executable id of a bucket, compiled (or loaded from a cache tier) unless this daemon holds it."""
        bucket_id = dynamic.buckets.get(buckets)
        if bucket_id is not None:
            try:
                return self.service.loaded(bucket_id).id
            except NotFound:  # evicted (max_loaded, max_weight_bytes): bound again, from L1 if it is there
                pass
        axis_sizes = dict(zip(dynamic.signature.axes, buckets))
        result = compile(dataclasses.replace(dynamic.spec, bucket_sizes=(), feeds=[
            (name, dtype, at_sizes(shape, axis_sizes)) for name, dtype, shape in dynamic.spec.feeds]))
        if result.cache == "miss":
            self.service.counters.add(bucket_compiles=1)
        dynamic.buckets[buckets] = result.loaded.id
        return result.loaded.id
