"""FindMissingBlobs: the digests no tier holds. UploadBlobs: a stream of chunks put together into blobs, one blob
at a time (so a call holds at most one blob's bytes), each stored only once its bytes hash to its digest
(docs/cache.md, Blobs)."""
from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Callable

from xlacs.v1 import xlacs_pb2

from xlacs_server.cache.blobs import Blobs
from xlacs_server.digest import Digest, checked_digest
from xlacs_server.errors import InvalidRequest, LimitExceeded


def find_missing(blobs: Blobs, digests: list[Digest], max_digests: int) -> tuple[list[Digest], int]:
    """(the digests no tier holds, the bytes of the others: not uploaded); more than `max_digests`
    (max_graph_nodes: a graph's blobs are at most one per node) is LimitExceeded."""
    if len(digests) > max_digests:
        raise LimitExceeded(f"FindMissingBlobs asks about {len(digests)} digests", "max_graph_nodes", max_digests)
    missing = blobs.missing(digests)
    return missing, sum(d.size for d in set(digests).difference(missing))


def upload(blobs: Blobs, chunks: Iterable[xlacs_pb2.BlobChunk], max_blob_bytes: int,
           checkpoint: Callable[[str], None]) -> tuple[int, int]:
    """(blobs, bytes) stored from `chunks`: each blob as consecutive chunks from offset 0, complete when they
    reach its size. A blob over `max_blob_bytes` (max_graph_bytes: a blob is part of a graph) is LimitExceeded
    at its first chunk; a chunk out of place, or bytes that do not hash to their digest, InvalidRequest naming
    the blob. Blobs completed before the error stay stored; the faulty one is not."""
    stored = stored_bytes = 0
    digest, sha256, buffer = None, None, bytearray()
    for index, chunk in enumerate(chunks):
        checkpoint("the next chunk")
        named = checked_digest(chunk.digest, f"chunk {index}'s digest")
        if digest is None:
            digest, sha256, buffer = named, hashlib.sha256(), bytearray()
            if digest.size > max_blob_bytes:
                raise LimitExceeded(f"blob {digest.hash} has {digest.size} bytes", "max_graph_bytes", max_blob_bytes)
        elif named != digest:
            raise InvalidRequest(f"blob {digest.hash}: the stream went on to blob {named.hash} at {len(buffer)} "
                                 f"of its {digest.size} bytes")
        if chunk.offset != len(buffer):
            raise InvalidRequest(f"blob {digest.hash}: chunk at offset {chunk.offset}, expected {len(buffer)}")
        end = chunk.offset + len(chunk.data)
        if end > digest.size:
            raise InvalidRequest(f"blob {digest.hash}: chunk at offset {chunk.offset} with {len(chunk.data)} bytes "
                                 f"ends at {end}, past its size_bytes {digest.size}")
        sha256.update(chunk.data)
        buffer += chunk.data
        if end == digest.size:
            if sha256.hexdigest() != digest.hash:
                raise InvalidRequest(f"blob {digest.hash} ({digest.size} bytes): its content hashes to "
                                     f"{sha256.hexdigest()}; not stored")
            blobs.put(digest, bytes(buffer))
            stored, stored_bytes, digest = stored + 1, stored_bytes + digest.size, None
    if digest is not None:
        raise InvalidRequest(f"blob {digest.hash}: the stream ended at {len(buffer)} of its {digest.size} bytes")
    return stored, stored_bytes
