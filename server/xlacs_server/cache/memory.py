"""L1: loaded executables in process, LRU-bounded by count and by bytes. The first tier: every Compile looks
here before it waits for anything, and the dashboard lists what it holds."""
from __future__ import annotations

import threading
from collections import OrderedDict

from xlacs_server.cache.stats import TierStats
from xlacs_server.cache.tier import Tier
from xlacs_server.config import Settings
from xlacs_server.execute.devices import DeviceRef
from xlacs_server.execute.executable import Executable


def open_tier(settings: Settings) -> MemoryCache:
    """Always there: XLACS_L1_MAX_ENTRIES and XLACS_L1_MAX_BYTES bound it."""
    return MemoryCache(settings.l1_max_entries, settings.l1_max_bytes)


class MemoryCache(Tier):
    """Executables as loaded, by cache key and device: a program is loaded onto (and assigned to) one device, so
    each device of a kind holds its own, while the slower tiers serve one entry to all of them."""
    tier = "l1"

    def __init__(self, max_entries: int, max_bytes: int):
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], Executable] = OrderedDict()  # (key, device name)
        self._lock = threading.Lock()
        self.stats = TierStats(self.tier)

    def get(self, key: str, device: DeviceRef) -> Executable | None:
        """The executable as it was loaded onto `device`."""
        with self._lock:
            entry = self._entries.get((key, device.name))
            if entry is not None:
                self._entries.move_to_end((key, device.name))
            return entry

    def peek(self, key: str) -> Executable | None:
        """The executable of `key` used last, on any device, left where it is in the LRU order (for the
        dashboard: a look is no use)."""
        with self._lock:
            return next((e for (k, _), e in reversed(self._entries.items()) if k == key), None)

    def put(self, executable: Executable, serialized: bytes) -> None:
        """Holds the executable itself; `serialized` is unused (executable.serialized is what workers load). Put
        again once its optimized program replaced a tiered compile's quick one, whose size differs, so the bytes
        are summed anew."""
        key = (executable.key, executable.device.name)
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = executable
            while len(self._entries) > self.max_entries or (self._bytes() > self.max_bytes and len(self._entries) > 1):
                self._entries.popitem(last=False)
                self.stats.evictions += 1
            self.stats.entries, self.stats.bytes = len(self._entries), self._bytes()

    def _bytes(self) -> int:
        return sum(e.size_bytes for e in self._entries.values())

    def values(self) -> list[Executable]:
        with self._lock:
            return list(self._entries.values())


class MemoryBlobs:
    """Blobs and graph manifests in this process, LRU-bounded by bytes (XLACS_BLOB_MEMORY_BYTES): what a compile
    by digest reads first. Only checked bytes are put here, so what it holds is not hashed again; a blob bigger
    than the whole bound stays in the slower tiers only."""
    tier = "l1"

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._blobs: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self.stats = TierStats(self.tier)

    def has(self, names: list[tuple[str, int | None]]) -> list[bool]:
        with self._lock:
            return [name in self._blobs for name, _ in names]

    def get(self, name: str, size: int | None) -> bytes | None:
        with self._lock:
            data = self._blobs.get(name)
            if data is not None:
                self._blobs.move_to_end(name)
            return data

    def put(self, name: str, data: bytes, size: int | None) -> None:
        if len(data) > self.max_bytes:
            return
        data = bytes(data)  # a view's bytes (Blobs.put), copied only when kept; bytes are not copied
        with self._lock:
            self._pop(name)
            self._blobs[name] = data
            self.stats.bytes += len(data)
            while self.stats.bytes > self.max_bytes:
                self._pop(next(iter(self._blobs)))
                self.stats.evictions += 1
            self.stats.entries = len(self._blobs)

    def delete(self, name: str, size: int | None) -> None:
        with self._lock:
            self._pop(name)
            self.stats.entries = len(self._blobs)

    def _pop(self, name: str) -> None:
        data = self._blobs.pop(name, None)
        if data is not None:
            self.stats.bytes -= len(data)
