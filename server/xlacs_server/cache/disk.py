"""The local-directory tier (the default without Redis): one file per entry, LRU by modification time.

Anyone who can write the directory can put anything there: an entry is opened without following links and
without blocking, must be a regular file no bigger than an entry may be (checked with fstat before reading),
and the directory itself must not be writable by other users (refused at start)."""
from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import secrets
import shutil
import stat
import threading
import time
from typing import Callable

from xlacs_server.cache.entry import RejectedEntry
from xlacs_server.cache.persistent import PersistentTier
from xlacs_server.cache.secret import cache_secret, check_not_loose
from xlacs_server.cache.stats import TierStats
from xlacs_server.config import Settings

log = logging.getLogger(__name__)

SUFFIX = ".xce"
# A put scans the directory (to evict) only when the bytes it knows of pass the bound, or when its last scan is older
# than this: other processes that share the directory write to it too, and their entries count from the next scan.
RESCAN_S = 30.0


def open_tier(settings: Settings) -> PersistentTier | None:
    """XLACS_CACHE_DIR when there is no Redis (Redis is the tier that replicas share; one of the two is used, so
    the directory's default does not turn it on beside a Redis); "" for none. A directory that cannot be used is
    logged and skipped; a bad secret configuration raises CacheConfigError."""
    if settings.redis_url or not settings.cache_dir:
        return None
    directory = pathlib.Path(settings.cache_dir).expanduser()
    try:
        secret = cache_secret(settings, directory)
        store = DiskStore(directory, settings.cache_dir_max_bytes, settings.cache_ttl_s,
                          settings.cache_max_entry_bytes)
    except OSError as e:
        log.warning("cache directory %s cannot be used, caching in memory only: %s", directory, e)
        return None
    log.info("cache tier disk: %s", directory)
    return PersistentTier(store, secret, settings.cache_max_entry_bytes)


class DiskStore:
    """Entry bytes by key. Writes are atomic (a temporary file, then a rename), so processes that share the
    directory never read half an entry. A read refreshes the file's mtime, the LRU clock of eviction."""
    tier = "disk"

    def __init__(self, directory: pathlib.Path, max_bytes: int, ttl_s: int, max_entry_bytes: int):
        self.directory = directory
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self.max_entry_bytes = max_entry_bytes
        self.stats = TierStats(self.tier)
        self._lock = threading.Lock()
        self._sizes: dict[str, int] = {}  # entry bytes by key, as of the last scan and this process's writes since
        self._bytes = 0
        self._scanned = 0.0
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        check_not_loose(directory, "the cache directory", directory.stat())
        self._evict()

    def blob_store(self, settings: Settings) -> DiskBlobs | None:
        """Blobs and graph manifests in the blobs/ subdirectory, under the same rules and the same byte bound."""
        try:
            return DiskBlobs(DiskStore(self.directory / "blobs", self.max_bytes, self.ttl_s,
                                       settings.max_graph_bytes))
        except OSError as e:
            log.warning("cache directory %s/blobs cannot be used, keeping blobs in memory only: %s",
                        self.directory, e)
            return None

    def _path(self, key: str) -> pathlib.Path:
        return self.directory / f"{key}{SUFFIX}"

    def location(self, key: str) -> str:
        """Where the key's entry is, for messages."""
        return str(self._path(key))

    def get(self, key: str) -> bytes | None:
        """The entry's bytes; None if there is none; RejectedEntry if what is there is no entry file."""
        path = self._path(key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as e:  # ELOOP: a symbolic link; EACCES: not readable by this user
            raise RejectedEntry("not_a_file", f"{path} cannot be opened as a file: {e}") from None
        try:
            # Checked before anything reads the descriptor: a directory opens, but os.fdopen refuses it.
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise RejectedEntry("not_a_file", f"{path} is not a regular file")
            if st.st_size > self.max_entry_bytes:
                raise RejectedEntry("too_big", f"{path} has {st.st_size} bytes, over "
                                               f"cache_max_entry_bytes={self.max_entry_bytes}")
            if self.ttl_s and time.time() - st.st_mtime > self.ttl_s:
                self.delete(key)
                return None
            with os.fdopen(fd, "rb", closefd=False) as f:
                blob = f.read(st.st_size)
            os.utime(fd)
            return blob
        except OSError as e:
            self._failed("read", key, e)
            return None
        finally:
            os.close(fd)

    def put(self, key: str, blob: bytes) -> None:
        """Replaces whatever stands at the entry's path (get refuses anything but an entry file)."""
        tmp = self.directory / f".{key}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            tmp.write_bytes(blob)
            try:
                os.replace(tmp, self._path(key))
            except IsADirectoryError:  # a rename never replaces a directory by a file
                _remove(self._path(key))
                os.replace(tmp, self._path(key))
        except OSError as e:
            tmp.unlink(missing_ok=True)
            self._failed("write", key, e)
            return
        with self._lock:
            self._count(key, len(blob))
            due = self._bytes > self.max_bytes or time.monotonic() - self._scanned > RESCAN_S
        if due:
            self._evict()

    def delete(self, key: str) -> None:
        """Removes the entry, or whatever stands at its path."""
        try:
            _remove(self._path(key))
        except OSError as e:
            self._failed("delete", key, e)
        with self._lock:
            self._count(key, None)

    def _count(self, key: str, size: int | None) -> None:
        """Counts the key's entry as `size` bytes (None: gone); called with the lock held."""
        self._bytes += (size or 0) - self._sizes.pop(key, 0)
        if size is not None:
            self._sizes[key] = size
        self.stats.entries, self.stats.bytes = len(self._sizes), self._bytes

    @contextlib.contextmanager
    def lease(self, key: str, checkpoint: Callable[[str], None]):
        """Always held: processes that share a directory do not wait for each other's compiles."""
        yield True

    def close(self) -> None:
        """Nothing to release: a directory has no leases."""

    def _evict(self) -> None:
        """Scans the directory and deletes the least recently used entries beyond max_bytes; the counts restart from
        what the scan found."""
        with self._lock:
            try:
                files = []
                for path in self.directory.glob(f"*{SUFFIX}"):
                    with contextlib.suppress(FileNotFoundError):  # deleted meanwhile by another process
                        st = path.lstat()
                        files.append((st.st_mtime, st.st_size, path))
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
            self._sizes = {path.name[:-len(SUFFIX)]: size for _, size, path in files}
            self._bytes, self._scanned = total, time.monotonic()
            self.stats.entries, self.stats.bytes = len(files), total

    def _failed(self, what: str, key: str, error: OSError) -> None:
        self.stats.add(errors=1)
        log.warning("cache directory %s: %s of %s failed, serving without it: %s", self.directory, what, key, error)


class DiskBlobs:
    """Blobs and graph manifests, one file each, by name (`blob.<digest>`, `manifest.<digest>`); read with the
    entries' checks, and re-hashed by the walk (cache/blobs.py)."""
    tier = "disk"

    def __init__(self, store: DiskStore):
        self.store = store
        self.stats = store.stats

    def has(self, names: list[tuple[str, int | None]]) -> list[bool]:
        return [_is_file(self.store._path(name)) for name, _ in names]

    def get(self, name: str, size: int | None) -> bytes | None:
        return self.store.get(name)

    def put(self, name: str, data: bytes, size: int | None) -> None:
        self.store.put(name, data)

    def delete(self, name: str, size: int | None) -> None:
        self.store.delete(name)


def _remove(path: pathlib.Path) -> None:
    """Removes what stands at `path`, a directory with what it holds included."""
    try:
        path.unlink(missing_ok=True)
    except IsADirectoryError:
        shutil.rmtree(path)  # never follows a symbolic link


def _is_file(path: pathlib.Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:  # not there, or not readable: missing either way
        return False
