"""The local-directory tier (the default without Redis): one file per entry, LRU by modification time."""
from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import secrets
import threading
import time
from typing import Callable

from xlacs_server.cache.stats import TierStats

log = logging.getLogger(__name__)

SUFFIX = ".xce"


class DiskStore:
    """Entry bytes by key. Writes are atomic (a temporary file, then a rename), so processes that share the
    directory never read half an entry. A read refreshes the file's mtime, the LRU clock of eviction."""
    tier = "disk"

    def __init__(self, directory: pathlib.Path, max_bytes: int, ttl_s: int):
        self.directory = directory
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self.stats = TierStats(self.tier)
        self._lock = threading.Lock()
        directory.mkdir(parents=True, exist_ok=True)
        self._evict()

    def _path(self, key: str) -> pathlib.Path:
        return self.directory / f"{key}{SUFFIX}"

    def get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            if self.ttl_s and time.time() - path.stat().st_mtime > self.ttl_s:
                path.unlink(missing_ok=True)
                return None
            blob = path.read_bytes()
            os.utime(path)
            return blob
        except FileNotFoundError:
            return None
        except OSError as e:
            self._failed("read", key, e)
            return None

    def put(self, key: str, blob: bytes) -> None:
        tmp = self.directory / f".{key}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            tmp.write_bytes(blob)
            os.replace(tmp, self._path(key))
        except OSError as e:
            tmp.unlink(missing_ok=True)
            self._failed("write", key, e)
            return
        self._evict()

    @contextlib.contextmanager
    def lease(self, key: str, checkpoint: Callable[[str], None]):
        """Always held: processes that share a directory do not wait for each other's compiles."""
        yield True

    def _evict(self) -> None:
        """Deletes the least recently used entries beyond max_bytes; refreshes the entry and byte counts."""
        with self._lock:
            try:
                files = []
                for path in self.directory.glob(f"*{SUFFIX}"):
                    with contextlib.suppress(FileNotFoundError):  # deleted meanwhile by another process
                        stat = path.stat()
                        files.append((stat.st_mtime, stat.st_size, path))
            except OSError as e:
                self._failed("scan", str(self.directory), e)
                return
            files.sort()
            total = sum(size for _, size, _ in files)
            while files and total > self.max_bytes:
                _, size, path = files.pop(0)
                path.unlink(missing_ok=True)
                total -= size
                self.stats.add(evictions=1)
            self.stats.entries, self.stats.bytes = len(files), total

    def _failed(self, what: str, key: str, error: OSError) -> None:
        self.stats.add(errors=1)
        log.warning("cache directory %s: %s of %s failed, serving without it: %s", self.directory, what, key, error)
