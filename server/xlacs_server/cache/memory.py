"""L1: loaded executables in process, LRU-bounded by count and by bytes."""
from __future__ import annotations

import threading
from collections import OrderedDict

from xlacs_server.cache.stats import TierStats


class MemoryCache:
    tier = "l1"

    def __init__(self, max_entries: int, max_bytes: int):
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, object] = OrderedDict()
        self._lock = threading.Lock()
        self.stats = TierStats(self.tier)

    def get(self, key: str):
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.stats.misses += 1
                return None
            self._entries.move_to_end(key)
            self.stats.hits += 1
            self.stats.compile_ms_saved += entry.stage_ms.get("compile", 0.0) + entry.stage_ms.get("lower", 0.0)
            return entry

    def peek(self, key: str):
        """The entry without counting a hit or a miss (for GetExecutable and Execute)."""
        with self._lock:
            return self._entries.get(key)

    def put(self, key: str, entry) -> None:
        with self._lock:
            if key in self._entries:
                self.stats.bytes -= self._entries.pop(key).size_bytes
            self._entries[key] = entry
            self.stats.bytes += entry.size_bytes
            while len(self._entries) > self.max_entries or \
                    (self.stats.bytes > self.max_bytes and len(self._entries) > 1):
                _, evicted = self._entries.popitem(last=False)
                self.stats.bytes -= evicted.size_bytes
                self.stats.evictions += 1
            self.stats.entries = len(self._entries)

    def values(self) -> list:
        with self._lock:
            return list(self._entries.values())
