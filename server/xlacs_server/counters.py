"""The daemon's counters of requests, compiles, executes, errors and bytes, as the dashboard and the error
interceptor read and add to them."""
from __future__ import annotations

import collections
import dataclasses
import threading
import time


@dataclasses.dataclass
class Counters:
    requests: int = 0  # RPCs received, counted by the interceptor
    compiles: int = 0
    executes: int = 0
    errors: int = 0
    upload_saved_bytes: int = 0  # bytes of blobs FindMissingBlobs found here already: not uploaded
    bucket_compiles: int = 0  # XLA compiles of a bucket of a dynamic executable (buckets/)
    padding_elements: int = 0  # zeros added to the inputs with unknown dims, of
    padded_elements: int = 0  # all their elements as padded
    received_bytes: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # by RPC
    started: float = dataclasses.field(default_factory=time.time)
    recent_errors: collections.deque = dataclasses.field(default_factory=lambda: collections.deque(maxlen=100))
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **deltas: int) -> None:
        """Adds to counters; RPCs on many threads count at once, and `+=` alone could lose some."""
        with self._lock:
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)

    def add_received(self, rpc: str, size: int) -> None:
        with self._lock:
            self.received_bytes[rpc] += size

    def received(self) -> dict[str, int]:
        """Request bytes received by RPC, as of now (a new RPC may be added while a reader iterates)."""
        with self._lock:
            return dict(sorted(self.received_bytes.items()))
