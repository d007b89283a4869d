"""Device-resident weight buffers keyed by content hash, and prepared weights keyed by executable and weights
digest, shared by every binding that uses them."""
from __future__ import annotations

import hashlib
import threading
import weakref
import jax
import numpy as np


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
    service bounds the resident bytes by dropping its least recently used bindings (`evictions`)."""

    def __init__(self):
        self._buffers: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._prepared: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        self.uploads = 0
        self.evictions = 0  # bindings dropped to stay within the budgets (max_loaded, max_weight_bytes)

    def resident_bytes(self) -> int:
        """Bytes of the distinct weight buffers and prepared weights that some binding still holds."""
        with self._lock:
            return sum(buffer.nbytes for buffer in [*self._buffers.values(), *self._prepared.values()])

    def evicted(self) -> None:
        with self._lock:
            self.evictions += 1

    def upload(self, values: list[np.ndarray], hashes: list[str], device: jax.Device) -> list[jax.Array]:
        """The device buffers of `values`, whose content hashes are `hashes`."""
        buffers = []
        for h, value in zip(hashes, values):
            with self._lock:
                buffer = self._buffers.get((h, device.id, device.platform))
                if buffer is None:
                    buffer = jax.device_put(value, device)
                    self._buffers[(h, device.id, device.platform)] = buffer
                    self.uploads += 1
            buffers.append(buffer)
        return buffers

    def held(self, key: str, count: int, device: jax.Device) -> list[jax.Array] | None:
        """The `count` prepared weights stored under `key` on `device` while some binding holds them, else None.
        `key` names an executable and a weights digest."""
        with self._lock:
            found = [self._prepared.get((key, i, device.id, device.platform)) for i in range(count)]
        return None if None in found else found

    def hold(self, key: str, device: jax.Device, prepared: list[jax.Array]) -> list[jax.Array]:
        """`prepared`, stored under `key` on `device` for the bindings that follow."""
        with self._lock:
            self._prepared.update(((key, i, device.id, device.platform), p) for i, p in enumerate(prepared))
        return prepared
