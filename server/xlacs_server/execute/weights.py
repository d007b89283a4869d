"""Device-resident weight buffers keyed by content hash, and prepared weights keyed by executable and weights
digest, shared by every binding that uses them, each charged against its device's budget while it lives
(device_budget.py)."""
from __future__ import annotations

import hashlib
import threading
import weakref

import jax
import numpy as np

from xlacs_server.execute.device_budget import WEIGHTS, DeviceBudget
from xlacs_server.execute.devices import DeviceRef


def content_hash(dtype: np.dtype, shape: tuple[int, ...], blob_hash: str) -> str:
    """A weight's identity: its dtype, its shape and the sha256 of its raw bytes (the hash of its blob's
    digest), so that the same bytes as another dtype or shape are another weight, and a weight read from a blob
    needs no hashing again."""
    return hashlib.sha256(f"{np.dtype(dtype).name}:{tuple(shape)}:{blob_hash}".encode()).hexdigest()


def weights_digest(hashes: list[str]) -> str:
    """The digest of a weight set, from its weights' content hashes in order: an executable id's second part."""
    return hashlib.sha256("".join(hashes).encode()).hexdigest()


class WeightStore:
    """Uploads each distinct weight once per device, and holds the prepared weights of each weight set once per
    executable (LoadedExecutables.bind finds or computes them); a buffer lives while some binding holds it, so the
    service bounds the resident bytes by dropping its least recently used bindings (`evictions`). A buffer's bytes
    count against its device's budget until it is collected."""

    def __init__(self, budget: DeviceBudget):
        self.budget = budget
        self._buffers: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._prepared: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        self.uploads = 0
        self.evictions = 0  # bindings dropped to stay within the budgets (max_loaded, max_weight_bytes)

    def resident_bytes(self) -> int:
        """Bytes of the distinct weight buffers and prepared weights that some binding still holds."""
        with self._lock:
            return sum(buffer.nbytes for buffer in [*self._buffers.values(), *self._prepared.values()])

    def missing_bytes(self, hashes: list[str], sizes: list[int], device: DeviceRef) -> int:
        """Bytes of the weights of `hashes` (of `sizes` bytes) that `device` does not hold: what uploading them adds."""
        with self._lock:
            return sum(size for h, size in zip(hashes, sizes) if self._buffers.get(self._key(h, device)) is None)

    def evicted(self) -> None:
        with self._lock:
            self.evictions += 1

    def upload(self, values: list[np.ndarray], hashes: list[str], device: DeviceRef) -> list[jax.Array]:
        """The device buffers of `values`, whose content hashes are `hashes`; LimitExceeded past the device's
        budget."""
        buffers = []
        for h, value in zip(hashes, values):
            with self._lock:
                buffer = self._buffers.get(self._key(h, device))
                if buffer is None:
                    self.budget.charge(device.name, WEIGHTS, value.nbytes, f"a weight of {value.nbytes} bytes")
                    try:
                        buffer = jax.device_put(value, device.device)
                    except BaseException:
                        self.budget.credit(device.name, WEIGHTS, value.nbytes)
                        raise
                    self._counted(buffer, device)
                    self._buffers[self._key(h, device)] = buffer
                    self.uploads += 1
            buffers.append(buffer)
        return buffers

    def held(self, key: str, count: int, device: DeviceRef) -> list[jax.Array] | None:
        """The `count` prepared weights stored under `key` on `device` while some binding holds them, else None.
        `key` names an executable and a weights digest."""
        with self._lock:
            found = [self._prepared.get(self._key(key, device, i)) for i in range(count)]
        return None if None in found else found

    def hold(self, key: str, device: DeviceRef, prepared: list[jax.Array]) -> list[jax.Array]:
        """`prepared`, stored under `key` on `device` for the bindings that follow; LimitExceeded past the device's
        budget (the arrays then go)."""
        size = sum(p.nbytes for p in prepared)
        with self._lock:
            self.budget.charge(device.name, WEIGHTS, size, f"{len(prepared)} prepared weight(s) of {size} bytes")
            for i, p in enumerate(prepared):
                self._counted(p, device)
                self._prepared[self._key(key, device, i)] = p
        return prepared

    def _counted(self, buffer: jax.Array, device: DeviceRef) -> None:
        """Credits the device's budget with `buffer`'s bytes, charged already, once it is collected."""
        weakref.finalize(buffer, self.budget.credit, device.name, WEIGHTS, buffer.nbytes)

    @staticmethod
    def _key(name: str, device: DeviceRef, index: int | None = None) -> tuple:
        return (name, device.name) if index is None else (name, index, device.name)
