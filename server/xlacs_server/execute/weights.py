"""Device-resident weight buffers keyed by content hash, shared by every executable that binds them."""
from __future__ import annotations

import hashlib
import threading
import weakref

import jax
import numpy as np

from xlacs import dtypes


def content_hash(value: np.ndarray) -> str:
    h = hashlib.sha256(f"{value.dtype.str}:{value.shape}:".encode())  # SHA-NI makes it the fastest here
    h.update(dtypes.byte_view(value))
    return h.hexdigest()


class WeightStore:
    """Uploads each distinct weight once per device; a buffer lives while some binding holds it, so the
    service bounds the resident bytes by dropping its least recently used bindings (`evictions`)."""

    def __init__(self):
        self._buffers: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        self.uploads = 0
        self.evictions = 0  # bindings dropped to stay within the budgets (max_loaded, max_weight_bytes)

    def resident_bytes(self) -> int:
        """Bytes of the distinct weight buffers that some binding still holds."""
        with self._lock:
            return sum(buffer.nbytes for buffer in self._buffers.values())

    def evicted(self) -> None:
        with self._lock:
            self.evictions += 1

    def bind(self, values: list[np.ndarray], device: jax.Device) -> tuple[str, list[jax.Array]]:
        """(digest of all the weights, their device buffers)."""
        hashes = [content_hash(v) for v in values]
        buffers = []
        for h, value in zip(hashes, values):
            with self._lock:
                buffer = self._buffers.get((h, device.id, device.platform))
                if buffer is None:
                    buffer = jax.device_put(value, device)
                    self._buffers[(h, device.id, device.platform)] = buffer
                    self.uploads += 1
            buffers.append(buffer)
        return hashlib.sha256("".join(hashes).encode()).hexdigest(), buffers
