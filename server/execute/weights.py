"""Device-resident weight buffers keyed by content hash, shared by every executable that binds them."""
from __future__ import annotations

import hashlib
import threading
import weakref

import jax
import numpy as np


def content_hash(value: np.ndarray) -> str:
    h = hashlib.sha256(f"{value.dtype.str}:{value.shape}:".encode())  # SHA-NI makes it the fastest here
    h.update(np.ascontiguousarray(value).data)
    return h.hexdigest()


class WeightStore:
    """Uploads each distinct weight once per device; a buffer lives while some binding holds it."""

    def __init__(self):
        self._buffers: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        self.uploads = 0

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
