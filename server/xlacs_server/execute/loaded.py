"""The loaded executables: an executable bound to its weights on a device (LoadedExecutable) under its executable
id, least recently used ones dropped past max_loaded and max_weight_bytes, and the ids that Compiles by digest
remember for the next one of the same request. A bind makes room on its device's budget (execute/device_budget.py)
by dropping that device's least recently used bindings first."""
from __future__ import annotations

import collections
import contextlib
import threading
from typing import Callable, ContextManager, Iterable, Iterator, Protocol

import jax
import numpy as np

from xlacs_server.config import Settings
from xlacs_server.errors import LimitExceeded, NotFound, echoed
from xlacs_server.execute.device_budget import RESIDENT, STATES
from xlacs_server.execute.devices import DeviceRef
from xlacs_server.execute.executable import Executable, LoadedExecutable
from xlacs_server.execute.weights import WeightStore, content_hash, weights_digest
from xlacs_server.tensor_sig import TensorSig


def untimed(stage: str) -> ContextManager:
    return contextlib.nullcontext()


class MissingWeights(Exception):
    """What a bind's `read` raises when it cannot give a weight (a blob a tier lost)."""


class KeptPrepared(Protocol):
    """Prepared weights kept in the cache tiers (cache/prepared.py), by an executable's key and a weights digest."""

    def get(self, name: str, sigs: list[TensorSig]) -> list[np.ndarray] | None: ...
    def put(self, name: str, sigs: list[TensorSig], values: Iterable[np.ndarray]) -> None: ...


def _on_host(arrays: list[jax.Array]) -> Iterator[np.ndarray]:
    """The arrays' values as read-only host arrays, one at a time: a CPU device's are views of its buffers; another
    device's are copied, each copy freed once the next is asked for (np.asarray would keep it on the array)."""
    host = jax.devices("cpu")[0]
    for array in arrays:
        yield np.asarray(jax.device_put(array, host))


class LoadedExecutables:
    def __init__(self, settings: Settings, weights: WeightStore, default_device: str, kept: KeptPrepared | None):
        self.settings = settings
        self.weights = weights
        self.kept = kept  # None without a shared tier: the prepared weights are held while bound only
        self.default_device = default_device  # its bindings' ids name no device
        self._loaded: collections.OrderedDict[str, LoadedExecutable] = collections.OrderedDict()
        self._lock = threading.Lock()
        # A Compile by digest whose graph, signature, device and name were bound before -> that binding's id
        self._by_digest: collections.OrderedDict[tuple, str] = collections.OrderedDict()

    def get(self, executable_id: str) -> LoadedExecutable:
        """The loaded executable of `executable_id`, now the most recently used; NOT_FOUND if it is not loaded."""
        with self._lock:
            loaded = self._loaded.get(executable_id)
            if loaded is not None:
                self._loaded.move_to_end(executable_id)
        if loaded is None:
            raise NotFound(f"executable {echoed(executable_id)} is not loaded on this server; Compile it first")
        return loaded

    def bind(self, executable: Executable, read: Callable[[list[int]], list[np.ndarray]], blob_hashes: list[str],
             inputs: list[TensorSig], outputs: list[TensorSig], device: DeviceRef,
             keep: Callable[[str, Callable[[], None]], None],
             stage: Callable[[str], ContextManager] = untimed) -> LoadedExecutable:
        """The executable bound to its lifted weights (the sha256 of whose raw bytes are `blob_hashes`; `read(indices)`
        gives those at `indices` of executable.params, or raises MissingWeights, and is asked only for those this
        bind uploads) and to the names of `inputs` and `outputs`; its id adds the weights' digest to the key. An
        executable with a prepare part binds the prepared weights that a binding of the same weights holds, else
        those the tiers keep (stage "prepared"), else runs the prepare program on the weights (stage "prepare")
        and has `keep(name, store)` run `store()`, which keeps its results in the tiers, off the Compile's path;
        the lifted weights that only it reads are then uploaded for that run only. `stage(name)` times each stage
        of it."""
        params = executable.params
        with stage("bind"):
            size = sum(p.nbytes for p in params)
            if size > self.settings.max_weight_bytes:
                raise LimitExceeded(f"the graph's weights take {size} bytes", "max_weight_bytes",
                                    self.settings.max_weight_bytes)
            hashes = [content_hash(p.dtype, p.shape, blob) for p, blob in zip(params, blob_hashes)]
            digest = weights_digest(hashes)
            prepare = executable.prepare
            call = list(range(len(params))) if prepare is None else prepare.call_params
            self._make_room(executable, device, hashes, f"{executable.key}.{digest}")
        values = read(call)  # timed by the caller: a record's are read from the tiers
        with self.weights.budget.allocating(device.name, f"binding the weights of executable {executable.key}"):
            with stage("bind"):
                buffers = self.weights.upload(values, [hashes[i] for i in call], device)
            if prepare is not None:
                buffers += self._prepared(executable, f"{executable.key}.{digest}", read, hashes, device, keep,
                                          stage)
        with stage("bind"):
            loaded = self._register(executable, inputs, outputs, digest if params else "", buffers)
        return loaded

    def _make_room(self, executable: Executable, device: DeviceRef, hashes: list[str], prepared: str) -> None:
        """Room on `device` for the weights of `hashes` it lacks and the prepared weights `prepared` names unless
        held (the prepare run may upload every lifted weight): least recently used bindings on the device go until
        they fit; LimitExceeded (max_device_bytes), evicting none, when even evicting every one would not do."""
        sizes = [p.nbytes for p in executable.params]
        needed = self.weights.missing_bytes(hashes, sizes, device)
        if executable.prepare is not None and self.weights.held(prepared, len(executable.prepare.outputs),
                                                                device) is None:
            needed += sum(s.nbytes for s in executable.prepare.outputs)
        budget = self.weights.budget
        budget.check(device.name, needed, f"binding the weights of executable {executable.key}", (RESIDENT, STATES))
        with self._lock:
            while budget.room(device.name) < needed:
                victim = next((i for i, l in self._loaded.items() if l.executable.device.name == device.name), None)
                if victim is None:
                    break
                del self._loaded[victim]
                self.weights.evicted()

    def _prepared(self, executable: Executable, name: str, read: Callable[[list[int]], list[np.ndarray]],
                  hashes: list[str], device: DeviceRef, keep: Callable[[str, Callable[[], None]], None],
                  stage: Callable[[str], ContextManager]) -> list[jax.Array]:
        """The prepared weights of the lifted weights whose content hashes are `hashes` (named `name`): held by a
        binding, kept in the tiers, or computed now and kept there by `keep`."""
        prepare = executable.prepare
        held = self.weights.held(name, len(prepare.outputs), device)
        if held is not None:
            return held
        if self.kept is not None:
            with stage("prepared"):
                kept = self.kept.get(name, prepare.outputs)
                if kept is not None:
                    return self.weights.hold(name, device, [jax.device_put(v, device.device) for v in kept])
        values = read(list(range(len(hashes))))
        with stage("prepare"):
            prepared = prepare.run(self.weights.upload(values, hashes, device))
        if self.kept is not None:
            kept = self.kept
            keep(name, lambda: kept.put(name, prepare.outputs, _on_host(prepared)))
        return self.weights.hold(name, device, prepared)

    def _register(self, executable: Executable, inputs: list[TensorSig], outputs: list[TensorSig], digest: str,
                  buffers: list) -> LoadedExecutable:
        """The binding under its executable id, the least recently used ones dropped past the budgets."""
        loaded = LoadedExecutable(self._executable_id(executable, digest), executable, buffers, inputs, outputs)
        with self._lock:
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
            ("" if device == self.default_device else f"@{device}")

    def remember(self, by_digest: tuple, loaded: LoadedExecutable) -> None:
        """A Compile by digest's binding, for the next one with the same graph, signature, device and name."""
        with self._lock:
            self._by_digest[by_digest] = loaded.id
            self._by_digest.move_to_end(by_digest)
            while len(self._by_digest) > self.settings.max_loaded:
                self._by_digest.popitem(last=False)

    def remembered(self, by_digest: tuple) -> LoadedExecutable | None:
        """The binding a Compile by digest made before, while it is loaded; an entry whose binding is gone is
        dropped."""
        with self._lock:
            loaded = self._loaded.get(self._by_digest.get(by_digest, ""))
            if loaded is None:
                self._by_digest.pop(by_digest, None)
                return None
            self._loaded.move_to_end(loaded.id)
        return loaded
