"""Blobs and graph manifests in the replicas' shared Redis, over RedisStore's connection and circuit breaker.

A blob is stored in chunks of CHUNK_BYTES under PREFIX + name + ":" + index, so that no Redis value is huge; its
digest's size says how many. A manifest (small: a digest per cut) is one value under PREFIX + name. What Redis
evicts (allkeys-lru may take single chunks) is a missing chunk, so the blob is missing; what is read back is
re-hashed by the walk (cache/blobs.py) before it is used."""
from __future__ import annotations

from typing import Callable, Protocol

from xlacs_server.cache.stats import TierStats

CHUNK_BYTES = 4 << 20
FAILED = object()  # what Connection.call returns when Redis fails or is being left alone after a failure


class Connection(Protocol):
    """What the blobs use of redis_store.py's RedisStore: its key prefix and its calls through one circuit breaker."""
    prefix: str

    def call(self, what: str, command: Callable): ...


class RedisBlobs:
    """`stats.entries` and `stats.bytes` count what this replica wrote, as RedisStore's do; backend failures
    count in RedisStore's stats (one connection, one circuit breaker)."""
    tier = "l2"

    def __init__(self, store: Connection):
        self.store = store
        self.stats = TierStats(self.tier)

    def _keys(self, name: str, size: int | None) -> list[str]:
        if size is None:
            return [self.store.prefix + name]
        return [f"{self.store.prefix}{name}:{i}" for i in range(max(1, -(-size // CHUNK_BYTES)))]

    def has(self, names: list[tuple[str, int | None]]) -> list[bool]:
        """Whether every chunk of each is there (one round trip)."""
        keys = [self._keys(name, size) for name, size in names]

        def exists():
            pipe = self.store.client.pipeline(transaction=False)
            for chunks in keys:
                pipe.exists(*chunks)
            return pipe.execute()
        counts = self.store.call("blob exists", exists)
        if counts is FAILED:
            return [False] * len(names)
        return [n == len(chunks) for n, chunks in zip(counts, keys)]

    def get(self, name: str, size: int | None) -> bytes | None:
        keys, ttl_s = self._keys(name, size), self.store.ttl_s

        def read():
            pipe = self.store.client.pipeline(transaction=False)
            for key in keys:
                pipe.getex(key, ex=ttl_s) if ttl_s else pipe.get(key)
            return pipe.execute()
        chunks = self.store.call("blob get", read)
        if chunks is FAILED or any(c is None for c in chunks):
            return None
        return b"".join(chunks)

    def put(self, name: str, data: bytes, size: int | None) -> None:
        keys, view = self._keys(name, size), memoryview(data)

        def write():
            pipe = self.store.client.pipeline(transaction=False)
            for i, key in enumerate(keys):
                pipe.set(key, bytes(view[i * CHUNK_BYTES:(i + 1) * CHUNK_BYTES] if size is not None else view),
                         ex=self.store.ttl_s)
            return pipe.execute()
        if self.store.call("blob set", write) is not FAILED:
            self.stats.add(entries=1, bytes=len(data))

    def delete(self, name: str, size: int | None) -> None:
        self.store.call("blob delete", lambda: self.store.client.delete(*self._keys(name, size)))
