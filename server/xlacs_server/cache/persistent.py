"""The tier behind L1 (Redis or a directory): executables stored as signed entries, loaded back after checks."""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import pathlib
from typing import Callable

import numpy as np
from jax.errors import JaxRuntimeError

from xlacs_server.cache.disk import DiskStore
from xlacs_server.cache.entry import Entry, RejectedEntry, decode, encode
from xlacs_server.cache.redis_store import RedisStore
from xlacs_server.cache.secret import cache_secret, secret_id
from xlacs_server.config import Settings
from xlacs_server.execute.devices import DeviceRef
from xlacs_server.execute.executable import Executable, Prepare
from xlacs_server.execute.program import Program
from xlacs_server.passes.registry import PassRecord
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
            "stage_ms": e.stage_ms, "passes": [dataclasses.asdict(r) for r in e.passes],
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


class PersistentTier:
    """`store` holds the bytes (RedisStore or DiskStore); this checks, loads, counts, and coordinates compiles."""

    def __init__(self, store: RedisStore | DiskStore, secret: bytes, max_entry_bytes: int):
        self.store = store
        self.tier = store.tier
        self.stats = store.stats
        self.secret = secret
        # Entries and leases are stored under the secret's id: deployments with different secrets that share a
        # store keep apart instead of overwriting each other's entries.
        self.namespace = secret_id(secret)
        self.max_entry_bytes = max_entry_bytes

    def _stored(self, key: str) -> str:
        return f"{self.namespace}.{key}"

    @contextlib.contextmanager
    def flight(self, key: str, device: DeviceRef, checkpoint: Callable[[str], None]):
        """Yields the stored executable, or None: then this replica holds the key's lease (if the store has
        leases) until the block ends, and should compile and save(). Replicas that find the lease taken wait
        for it to go, then load what its holder saved; if it saved nothing, one of them takes the lease.
        `checkpoint(stage)` raises to stop the wait (the client cancelled, or its deadline passed)."""
        executable = self._fetch(key, device)
        while executable is None:
            with self.store.lease(self._stored(key), checkpoint) as held:
                # Look again: a peer may have saved it since. Right after taking the lease, a refused entry
                # is the one refused above, so it is not counted twice.
                executable = self._fetch(key, device, count_refusal=not held)
                if executable is None and held:
                    self.stats.add(misses=1)
                    yield None
                    return
        self.stats.add(hits=1, compile_ms_saved=executable.stage_ms.get("compile", 0.0) +
                       executable.stage_ms.get("lower", 0.0))
        yield executable

    def close(self) -> None:
        self.store.close()

    def save(self, executable: Executable, serialized: bytes) -> None:
        blob = encode(to_entry(executable, serialized), self.secret)
        if len(blob) > self.max_entry_bytes:
            log.info("%s: the entry of %s has %d bytes, over the %d-byte limit (XLACS_CACHE_MAX_ENTRY_BYTES); "
                     "kept in L1 only", self.tier, executable.key, len(blob), self.max_entry_bytes)
            return
        self.store.put(self._stored(executable.key), blob)

    def _fetch(self, key: str, device: DeviceRef, count_refusal: bool = True) -> Executable | None:
        try:
            blob = self.store.get(self._stored(key))
            if blob is None:
                return None
            entry = decode(blob, key, self.secret)
            try:
                return from_entry(entry, device)
            except (JaxRuntimeError, KeyError, TypeError, ValueError) as e:
                raise RejectedEntry("unloadable", f"{type(e).__name__}: {e}") from None
        except RejectedEntry as e:
            if count_refusal:
                self.stats.add(rejected=1)
                log.warning("%s: refused the entry of %s (%s); it is a miss, and the recompile replaces it",
                            self.tier, key, e)
            return None


def open_tier(settings: Settings) -> PersistentTier | None:
    """Redis when a URL is set, else the directory (if any); a directory that cannot be used is logged and
    skipped. A bad secret configuration raises CacheConfigError."""
    if settings.redis_url:
        store = RedisStore(settings.redis_url, settings.cache_key_prefix, settings.cache_ttl_s, settings.cache_lease_s)
        return PersistentTier(store, cache_secret(settings), settings.cache_max_entry_bytes)
    if not settings.cache_dir:
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
