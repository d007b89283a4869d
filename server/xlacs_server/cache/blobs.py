"""Content-addressed blobs (tensor contents, graph skeletons) and graph manifests in the cache tiers, fastest
first, and the walk over them (docs/cache.md, Blobs).

Each tier keeps blobs beside its executables: this process's memory (LRU by bytes), then Redis (in chunks) or
the directory, whichever the executables use. A blob is named by its digest, the sha256 of its bytes and their
size, and that is its integrity check: what a shared tier (Redis, the directory) returns is hashed again (or,
for the blobs of a graph, proved at once by the graph's digest: cache/graphs.py), and bytes that do not match
their name are a miss, counted as rejected and deleted there. A graph manifest is
kept under its graph's digest; the caller checks it (cache/graphs.py) and drops one that does not hold."""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

import numpy as np
from google.protobuf.message import DecodeError
from xlacs.v1 import xlacs_pb2

from xlacs_server.cache.entry import RejectedEntry
from xlacs_server.cache.memory import MemoryBlobs
from xlacs_server.cache.persistent import PersistentTier
from xlacs_server.cache.stats import TierStats
from xlacs_server.config import Settings
from xlacs_server.digest import Digest, digest_of

log = logging.getLogger(__name__)

class BlobStore(Protocol):
    """One tier's blobs, by name; `size` is a blob's (Redis chunks by it), None for a manifest."""
    tier: str
    stats: TierStats  # its hits, misses and rejected the walk counts; entries, bytes, evictions its own

    def has(self, names: list[tuple[str, int | None]]) -> list[bool]: ...
    def get(self, name: str, size: int | None) -> bytes | None: ...
    def put(self, name: str, data: bytes, size: int | None) -> None: ...
    def delete(self, name: str, size: int | None) -> None: ...


def open_blobs(settings: Settings, tiers: Iterable) -> Blobs:
    """In-process blobs, then beside each tier that holds bytes (Redis or the directory), in the tiers' order."""
    stores = [MemoryBlobs(settings.blob_memory_bytes)]
    stores += [tier.store.blob_store(settings) for tier in tiers if isinstance(tier, PersistentTier)]
    return Blobs([store for store in stores if store is not None])


class Blobs:
    """The blob stores, fastest first; the first, in this process, holds only checked bytes."""

    def __init__(self, stores: list[BlobStore]):
        self.stores = stores

    def missing(self, digests: Iterable[Digest]) -> list[Digest]:
        """The digests no tier holds (each asked once, one look per tier for those still missing). A tier that
        holds bytes under a digest that do not match it is found out when they are read."""
        left = list(dict.fromkeys(digests))
        for store in self.stores:
            if not left:
                break
            held = store.has([(_blob(d), d.size) for d in left])
            left = [d for d, h in zip(left, held) if not h]
        return left

    def get(self, digest: Digest) -> bytes | None:
        """The blob's bytes from the fastest tier that holds them intact, put into each faster tier."""
        found = self._get(_blob(digest), digest.size, lambda data: digest_of(data) == digest, fill=True)
        return None if found is None else found[0]

    def put(self, digest: Digest, data: bytes | np.ndarray) -> None:
        """Checked bytes into every tier, slowest first; `data` may be a view (a flat uint8 array), which each tier
        copies only as far as it keeps or sends it."""
        for store in reversed(self.stores):
            store.put(_blob(digest), data, digest.size)

    def find(self, digest: Digest) -> tuple[bytes, str] | None:
        """(bytes, the tier that had them) of the fastest tier that holds the blob, neither hashed nor put into a
        faster tier: for a caller that checks many blobs at once (a graph's digest proves every blob of it) and
        then calls keep() or reject() for each."""
        found = self._get(_blob(digest), digest.size, lambda data: True, fill=False)
        return None if found is None else (found[0], found[1].tier)

    def keep(self, digest: Digest, data: bytes, found_in: str) -> None:
        """A blob found in `found_in` and since checked, into each faster tier, slowest first."""
        for store in self._faster(found_in):
            store.put(_blob(digest), data, digest.size)

    def reject(self, digest: Digest, found_in: str) -> None:
        """A blob found in `found_in` whose bytes do not match its digest: counted as rejected there, deleted."""
        store = next(store for store in self.stores if store.tier == found_in)
        self._reject(store, _blob(digest), digest.size, "its bytes do not match its name")

    def get_record(self, name: str, intact: Callable[[bytes], bool]) -> bytes | None:
        """A small value kept under `name` (a binding record, cache/bindings.py) from the fastest tier that holds
        it, a shared tier's only if `intact(bytes)` (else it is rejected and deleted there), put into each faster
        tier."""
        found = self._get(name, None, intact, fill=True)
        return None if found is None else found[0]

    def put_record(self, name: str, data: bytes) -> None:
        for store in reversed(self.stores):
            store.put(name, data, None)

    def get_manifest(self, graph: Digest) -> tuple[xlacs_pb2.GraphManifest, str] | None:
        """(manifest, the tier that had it) kept under the graph's digest, unchecked: the caller checks it
        against the graph's bytes, then calls put_manifest (which fills the faster tiers) or drop_manifest."""
        found = self._get(_manifest(graph), None, _parses, fill=False)
        return None if found is None else (xlacs_pb2.GraphManifest.FromString(found[0]), found[1].tier)

    def put_manifest(self, graph: Digest, manifest: xlacs_pb2.GraphManifest, found_in: str | None = None) -> None:
        """A manifest whose bytes were found to hash to `graph`, into each tier faster than the one it was found
        in (every tier when it came with a request), slowest first."""
        data = manifest.SerializeToString(deterministic=True)
        for store in self._faster(found_in) if found_in else reversed(self.stores):
            store.put(_manifest(graph), data, None)

    def drop_manifest(self, graph: Digest, tier: str, why: str) -> None:
        """A stored manifest that does not hold (planted, or stale): counted as rejected by the tier that had it,
        and deleted from every tier."""
        log.warning("%s: graph manifest %s does not hold (%s); dropped, and the client is asked for it", tier,
                    graph, why)
        for store in self.stores:
            if store.tier == tier:
                store.stats.add(rejected=1)
            store.delete(_manifest(graph), None)

    def _get(self, name: str, size: int | None, intact, fill: bool) -> tuple[bytes, BlobStore] | None:
        """(bytes, store) of the fastest tier that holds them, a slower tier's only if `intact(bytes)`, and then
        put into each faster tier if `fill`."""
        for index, store in enumerate(self.stores):
            try:
                data = store.get(name, size)
            except RejectedEntry as e:  # the directory's checks: not a regular file, too big
                self._reject(store, name, size, str(e))
                data = None
            if data is not None and index and not intact(data):
                self._reject(store, name, size, "its bytes do not match its name")
                data = None
            if data is None:
                store.stats.add(misses=1)
                continue
            store.stats.add(hits=1)
            for faster in reversed(self.stores[:index] if fill else []):
                faster.put(name, data, size)
            return data, store
        return None

    def _faster(self, tier: str) -> list[BlobStore]:
        """The stores faster than `tier`'s, slowest first."""
        return self.stores[:[store.tier for store in self.stores].index(tier)][::-1]

    @staticmethod
    def _reject(store: BlobStore, name: str, size: int | None, why: str) -> None:
        log.warning("%s: refused %s (%s); it is a miss, and deleted", store.tier, name, why)
        store.stats.add(rejected=1)
        store.delete(name, size)


def _blob(digest: Digest) -> str:
    return f"blob.{digest.hash}-{digest.size}"


def _manifest(graph: Digest) -> str:
    return f"manifest.{graph.hash}-{graph.size}"


def _parses(data: bytes) -> bool:
    try:
        xlacs_pb2.GraphManifest.FromString(data)
    except DecodeError:
        return False
    return True
