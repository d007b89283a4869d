"""A blob's name, its sha256 and size (Digest), shared by the cache's blobs, the execute path's downloads and the
requests that name a graph by digest."""
from __future__ import annotations

import hashlib
import re
from typing import NamedTuple

from xlacs.v1 import xlacs_pb2

from xlacs_server.errors import InvalidRequest

_HASH = re.compile(r"[0-9a-f]{64}")


class Digest(NamedTuple):
    """The name of some bytes: their sha256 (64 lowercase hex digits) and their size."""
    hash: str
    size: int

    def __str__(self) -> str:
        return f"{self.hash}/{self.size}"


def digest_of(data) -> Digest:
    return Digest(hashlib.sha256(data).hexdigest(), len(data))


def checked_digest(digest: xlacs_pb2.Digest, what: str) -> Digest:
    """A request's Digest, or InvalidRequest naming `what` it is and what is wrong with it."""
    if not _HASH.fullmatch(digest.hash):
        raise InvalidRequest(f"{what}: hash {digest.hash[:80]!r} is not a sha256 in 64 lowercase hex digits")
    if digest.size_bytes < 0:
        raise InvalidRequest(f"{what}: size_bytes {digest.size_bytes} is negative")
    return Digest(digest.hash, digest.size_bytes)
