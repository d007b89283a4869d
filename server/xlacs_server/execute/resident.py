"""Resident tensors: outputs an Execute kept on the device (OutputRequest.keep) instead of sending them back,
named by unguessable handles, which later Executes take as inputs without a round trip through the client (as
IFRT proxy's arrays stay on the server). A tensor lives until FreeTensors frees it or its time to live runs out
(checked whenever it is looked up, and by a sweeper thread); together they stay within max_resident_bytes and
max_resident_tensors, and each device's within its budget beside the weights and states there (device_budget.py).

The store holds a reference to each jax.Array and never deletes a buffer itself: an Execute that took a tensor
as an input keeps it alive until the run ends, even if it is freed meanwhile.
"""
from __future__ import annotations

import dataclasses
import math
import secrets
import threading
import time

import jax
import numpy as np

from xlacs_server.errors import InvalidRequest, LimitExceeded, UnknownHandle
from xlacs_server.execute.device_budget import RESIDENT, DeviceBudget
from xlacs_server.execute.executable import LoadedExecutable

HANDLE_BYTES = 24  # secrets.token_urlsafe: 32 characters, 192 random bits
SWEEP_S = 1.0  # how often the sweeper frees the tensors whose time to live ran out


@dataclasses.dataclass(eq=False)
class ResidentTensor:
    handle: str
    array: jax.Array  # on the device of the executable that computed it
    executable_id: str
    device: str  # "cpu:0", ...
    output: str  # the name of the output it was
    expires: float  # in time.monotonic()

    @property
    def dtype(self) -> np.dtype:
        return self.array.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    @property
    def nbytes(self) -> int:
        return self.array.nbytes


def ttl(seconds: float, output: str) -> float:
    """An output's requested time to live (OutputRequest.ttl_s), checked: 0 means the daemon's default."""
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidRequest(f"output {output!r}: ttl_s={seconds} is not a number of seconds >= 0 (0: the "
                             "daemon's default, resident_ttl_s)", output=output)
    return seconds


def kept(loaded: LoadedExecutable, keep: dict[str, float]) -> list[int]:
    """The positions of the outputs of `loaded` that `keep` names; INVALID_ARGUMENT naming those it has not."""
    unknown = sorted(set(keep) - {s.name for s in loaded.outputs})
    if unknown:
        raise InvalidRequest(f"executable {loaded.id} has no output(s) {unknown} to keep; its outputs: "
                             f"{[s.name for s in loaded.outputs]}", output=unknown[0])
    return [i for i, s in enumerate(loaded.outputs) if s.name in keep]


class ResidentTensors:
    """The resident tensors of one daemon, by handle."""

    def __init__(self, max_bytes: int, max_tensors: int, default_ttl_s: float, budget: DeviceBudget):
        self.max_bytes, self.max_tensors, self.default_ttl_s = max_bytes, max_tensors, default_ttl_s
        self.budget = budget
        self.expired = 0  # tensors whose time to live ran out
        self.freed = 0  # tensors FreeTensors freed
        self._tensors: dict[str, ResidentTensor] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self._closed = threading.Event()
        # Started by the first keep: a daemon whose clients keep nothing runs no sweeper.
        self._sweeper = threading.Thread(target=self._sweep_until_closed, name="resident tensor sweeper",
                                         daemon=True)

    def keep(self, executable_id: str, device: str,
             outputs: list[tuple[str, jax.Array, float]]) -> list[ResidentTensor]:
        """Keeps the outputs of `executable_id`, (name, array on `device`, time to live in seconds or 0 for the
        default), under new handles: all of them, or none past the budgets (RESOURCE_EXHAUSTED naming the
        setting)."""
        size = sum(array.nbytes for _, array, _ in outputs)
        now = time.monotonic()
        with self._lock:
            self._drop_expired(now)
            if self._bytes + size > self.max_bytes:
                raise LimitExceeded(f"keeping {len(outputs)} output(s) of {size} bytes beside the {self._bytes} "
                                    f"bytes of {len(self._tensors)} resident tensor(s); free some (FreeTensors) "
                                    "or give them a shorter ttl_s", "max_resident_bytes", self.max_bytes)
            if len(self._tensors) + len(outputs) > self.max_tensors:
                raise LimitExceeded(f"keeping {len(outputs)} output(s) beside {len(self._tensors)} resident "
                                    "tensor(s); free some (FreeTensors)", "max_resident_tensors", self.max_tensors)
            self.budget.charge(device, RESIDENT, size, f"keeping {len(outputs)} output(s) of executable "
                                                       f"{executable_id}")
            kept = [ResidentTensor(secrets.token_urlsafe(HANDLE_BYTES), array, executable_id, device, name,
                                   now + (ttl_s or self.default_ttl_s)) for name, array, ttl_s in outputs]
            self._tensors.update((t.handle, t) for t in kept)
            self._bytes += size
            if not self._sweeper.is_alive() and not self._closed.is_set():
                self._sweeper.start()
        return kept

    def keep_outputs(self, loaded: LoadedExecutable, outputs: list, keep: dict[str, float]) -> list:
        """`outputs` of `loaded` (numpy arrays, or jax.Arrays on its device), those named in `keep` (name -> time
        to live, 0 for the default) replaced by resident tensors on its device: an isolated program's come back
        from its worker process on the host, and go to the device now."""
        device = loaded.executable.device
        positions = kept(loaded, keep)
        arrays = jax.device_put([outputs[i] for i in positions], device.device)
        tensors = self.keep(loaded.id, device.name, [(loaded.outputs[i].name, array, keep[loaded.outputs[i].name])
                                                     for i, array in zip(positions, arrays)])
        outputs = list(outputs)
        for i, tensor in zip(positions, tensors):
            outputs[i] = tensor
        return outputs

    def get(self, handle: str, what: str) -> ResidentTensor:
        """The tensor of `handle`; NOT_FOUND (UnknownHandle) naming it and `what` asked for it when it was freed,
        expired or never kept here."""
        with self._lock:
            tensor = self._tensors.get(handle)
            if tensor is not None and tensor.expires <= time.monotonic():
                self._drop(tensor)
                self.expired += 1
                tensor = None
        if tensor is None:
            raise UnknownHandle(handle, what)
        return tensor

    def fetch(self, handles: list[str]) -> list[np.ndarray]:
        """The values of `handles`' tensors, copied to the host (FetchTensors); they stay resident. A call copies
        at most max_resident_bytes (a handle named twice counts twice)."""
        self._check_count(handles, "FetchTensors")
        found = [self.get(handle, f"handles[{i}]") for i, handle in enumerate(handles)]
        size = sum(tensor.nbytes for tensor in found)
        if size > self.max_bytes:
            raise LimitExceeded(f"FetchTensors asks for {size} bytes of {len(found)} tensor(s); fetch them in "
                                "several calls", "max_resident_bytes", self.max_bytes)
        return [np.asarray(tensor.array) for tensor in found]

    def free(self, handles: list[str]) -> tuple[int, int]:
        """(tensors, bytes) freed; a handle already freed, expired or unknown frees nothing."""
        self._check_count(handles, "FreeTensors")
        tensors = size = 0
        with self._lock:
            for handle in dict.fromkeys(handles):
                tensor = self._tensors.get(handle)
                if tensor is not None:
                    self._drop(tensor)
                    tensors, size = tensors + 1, size + tensor.nbytes
            self.freed += tensors
        return tensors, size

    def sweep(self) -> None:
        """Frees the tensors whose time to live ran out."""
        with self._lock:
            self._drop_expired(time.monotonic())

    def tensors(self) -> list[ResidentTensor]:
        """Every resident tensor, the first to expire first."""
        with self._lock:
            return sorted(self._tensors.values(), key=lambda t: t.expires)

    def totals(self) -> tuple[int, int]:
        """(tensors, bytes) resident now."""
        with self._lock:
            return len(self._tensors), self._bytes

    def close(self) -> None:
        """At shutdown: stops the sweeper and frees every tensor."""
        with self._lock:
            self._closed.set()
        if self._sweeper.is_alive():
            self._sweeper.join()
        with self._lock:
            for tensor in list(self._tensors.values()):
                self._drop(tensor)

    def _check_count(self, handles: list[str], rpc: str) -> None:
        """A call names at most max_resident_tensors handles: no more can be resident."""
        if len(handles) > self.max_tensors:
            raise LimitExceeded(f"{rpc} names {len(handles)} handles", "max_resident_tensors", self.max_tensors)

    def _sweep_until_closed(self) -> None:
        while not self._closed.wait(SWEEP_S):
            self.sweep()

    def _drop_expired(self, now: float) -> None:
        expired = [t for t in self._tensors.values() if t.expires <= now]
        for tensor in expired:
            self._drop(tensor)
        self.expired += len(expired)

    def _drop(self, tensor: ResidentTensor) -> None:
        del self._tensors[tensor.handle]
        self._bytes -= tensor.nbytes
        self.budget.credit(tensor.device, RESIDENT, tensor.nbytes)
