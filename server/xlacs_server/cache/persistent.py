"""The tiers that hold bytes (Redis, a directory): executables stored as signed entries, loaded back after checks."""
from __future__ import annotations

import contextlib
import logging
from typing import Callable, ContextManager, Iterator, Protocol

import numpy as np
from jax.errors import JaxRuntimeError

from xlacs_server.cache.entry import Entry, RejectedEntry, decode, encode
from xlacs_server.cache.secret import secret_id
from xlacs_server.cache.stats import TierStats
from xlacs_server.cache.tier import Tier
from xlacs_server.config import Settings
from xlacs_server.execute.devices import DeviceRef
from xlacs_server.execute.executable import Executable, Prepare
from xlacs_server.execute.program import Program
from xlacs_server.passes.registry import PassRecord, record_fields
from xlacs_server.tensor_sig import TensorSig

log = logging.getLogger(__name__)


def _sigs(sigs: list[TensorSig]) -> list:
    return [[s.name, str(s.dtype), list(s.shape)] for s in sigs]


def _unsigs(rows: list) -> list[TensorSig]:
    return [TensorSig(name, np.dtype(dtype), tuple(shape)) for name, dtype, shape in rows]


def to_entry(executable: Executable, serialized: bytes) -> Entry:
    e = executable
    meta = {"graph_name": e.graph_name, "platform": e.device.platform, "device_kind": e.device.kind,
            "inputs": _sigs(e.inputs), "outputs": _sigs(e.outputs), "params": _sigs(e.params),
            "stage_ms": e.stage_ms, "passes": [record_fields(r) for r in e.passes],
            "op_histogram": e.op_histogram,
            "prepare": e.prepare and {"params": e.prepare.params, "call_params": e.prepare.call_params,
                                      "outputs": _sigs(e.prepare.outputs)}}
    return Entry(e.key, meta, serialized, e.stablehlo, e.created, prepare=e.prepare.serialized if e.prepare else b"",
                 prepare_stablehlo=e.prepare.stablehlo if e.prepare else "")


def from_entry(entry: Entry, device: DeviceRef) -> Executable:
    """The entry's executable, deserialized onto `device` (both its programs, if it has a prepare part)."""
    m = entry.meta
    p = m["prepare"]
    prepare = p and Prepare(Program.deserialize(entry.prepare, device.device), p["params"], p["call_params"],
                            _unsigs(p["outputs"]), entry.prepare_stablehlo, entry.prepare)
    return Executable(entry.key, m["graph_name"], device, _unsigs(m["inputs"]), _unsigs(m["outputs"]),
                      _unsigs(m["params"]), Program.deserialize(entry.executable, device.device), entry.stablehlo,
                      m["stage_ms"], [PassRecord(**r) for r in m["passes"]],
                      len(entry.executable) + len(entry.prepare),
                      op_histogram=m["op_histogram"], created=entry.created, serialized=entry.executable,
                      prepare=prepare)


class Store(Protocol):
    """Where a persistent tier's bytes are (redis_store.py's RedisStore, disk.py's DiskStore): entries by their
    stored key, compile leases, and the tier's blobs beside them. This base knows no store: each tier's module
    opens its own (its `open_tier`) and hands it in."""
    tier: str
    stats: TierStats

    def location(self, key: str) -> str: ...
    def get(self, key: str) -> bytes | None: ...
    def put(self, key: str, blob: bytes) -> None: ...
    def lease(self, key: str, checkpoint: Callable[[str], None]) -> ContextManager: ...
    def close(self) -> None: ...
    def blob_store(self, settings: Settings):
        """The store's blobs (a cache/blobs.py BlobStore), or None if it keeps none."""


class PersistentTier(Tier):
    """`store` holds the bytes (a Store, which says how it opens from the settings); this signs and checks
    entries, loads them, and names the store's leases."""

    def __init__(self, store: Store, secret: bytes, max_entry_bytes: int):
        self.store = store
        self.tier = store.tier
        self.stats = store.stats
        self.secret = secret
        # Entries and leases are stored under the secret's id: deployments with different secrets that share a
        # store keep apart instead of overwriting each other's entries.
        self.namespace = secret_id(secret)
        self.max_entry_bytes = max_entry_bytes

    def stored_key(self, key: str) -> str:
        """The store's name of the cache key's entry (and lease)."""
        return f"{self.namespace}.{key}"

    def get(self, key: str, device: DeviceRef) -> Executable | None:
        """Nothing stored is parsed before its MAC checks; an entry that fails a check raises RejectedEntry, which
        names where the entry is."""
        stored = self.stored_key(key)
        blob = self.store.get(stored)
        if blob is None:
            return None
        try:
            return from_entry(decode(blob, key, self.secret), device)
        except RejectedEntry as e:
            raise RejectedEntry(e.reason, f"{self.store.location(stored)}: {e.detail}") from None
        except (JaxRuntimeError, KeyError, TypeError, ValueError) as e:
            raise RejectedEntry("unloadable", f"{self.store.location(stored)}: {type(e).__name__}: {e}") from None

    def put(self, executable: Executable, serialized: bytes) -> None:
        blob = encode(to_entry(executable, serialized), self.secret)
        if len(blob) > self.max_entry_bytes:
            log.info("%s: the entry of %s has %d bytes, over the %d-byte limit (XLACS_CACHE_MAX_ENTRY_BYTES); "
                     "kept in L1 only", self.tier, executable.key, len(blob), self.max_entry_bytes)
            return
        self.store.put(self.stored_key(executable.key), blob)

    @contextlib.contextmanager
    def lease(self, key: str, checkpoint: Callable[[str], None]) -> Iterator[bool]:
        with self.store.lease(self.stored_key(key), checkpoint) as held:
            yield held

    def close(self) -> None:
        self.store.close()
