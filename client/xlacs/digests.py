"""Content addressing: bytes are named by their SHA-256 and size (xlacs.v1.Digest), as in Bazel's remote
execution API. A graph file is hashed through a memory map, and a client remembers the digests of the files it
has hashed, so compiling the same file again hashes nothing."""
from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import threading
from typing import Iterable, Iterator

from xlacs.v1 import xlacs_pb2

# Files whose digests a client remembers; beyond this, the oldest are forgotten (and hashed again if compiled).
MEMO_FILES = 1024
CHUNK_BYTES = 4 << 20  # a blob travels in chunks of this size (UploadBlobs, DownloadExecutable)


def digest(data) -> xlacs_pb2.Digest:
    """The digest of a bytes-like object (bytes, a memoryview of a mapped file, ...), without copying it."""
    return xlacs_pb2.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=memoryview(data).nbytes)


def blob_chunks(blobs: Iterable[tuple[xlacs_pb2.Digest, memoryview]]) -> Iterator[xlacs_pb2.BlobChunk]:
    """`blobs` as consecutive chunks of CHUNK_BYTES, each copied out of its view only as it is taken."""
    for d, data in blobs:
        for offset in range(0, max(len(data), 1), CHUNK_BYTES):  # an empty blob is one empty chunk
            yield xlacs_pb2.BlobChunk(digest=d, offset=offset, data=bytes(data[offset:offset + CHUNK_BYTES]))


def key(d: xlacs_pb2.Digest) -> tuple[str, int]:
    """A digest as a dict key or set member (messages are not hashable)."""
    return d.hash, d.size_bytes


class FileDigests:
    """The digests of the graph files a client has hashed, by (path, size, mtime_ns, inode): a file that is
    rewritten or replaced gets a new entry, hashed again."""

    def __init__(self):
        self._known: dict[tuple, xlacs_pb2.Digest] = {}
        self._lock = threading.Lock()  # a client may compile from several threads

    @contextlib.contextmanager
    def open(self, path: str | os.PathLike) -> Iterator[tuple[xlacs_pb2.Digest, memoryview]]:
        """(digest, the file's bytes mapped read-only). The digest is the remembered one when the file is
        unchanged, so the bytes are not read at all unless the caller reads them."""
        with open(path, "rb") as f:
            stat = os.fstat(f.fileno())
            if stat.st_size == 0:  # an empty file cannot be mapped; it is an empty GraphDef
                yield self._remember((os.fspath(path), 0, stat.st_mtime_ns, stat.st_ino), b""), memoryview(b"")
                return
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            with memoryview(mapped) as data:
                yield self._remember((os.fspath(path), stat.st_size, stat.st_mtime_ns, stat.st_ino), data), data
        finally:
            # Views of the map that the caller still holds (the cuts of a split) keep it open until they go.
            with contextlib.suppress(BufferError):
                mapped.close()

    def _remember(self, file_key: tuple, data) -> xlacs_pb2.Digest:
        with self._lock:
            known = self._known.get(file_key)
        if known is None:
            known = digest(data)
            with self._lock:
                self._known[file_key] = known
                while len(self._known) > MEMO_FILES:
                    del self._known[next(iter(self._known))]
        return known
