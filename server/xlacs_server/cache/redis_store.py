"""L2: entry bytes in a Redis shared by every replica, with compile leases; failures degrade to L1, never fail RPCs."""
from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
import urllib.parse
from typing import Callable

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from xlacs_server.cache.persistent import PersistentTier
from xlacs_server.cache.redis_blobs import FAILED, RedisBlobs
from xlacs_server.cache.secret import cache_secret
from xlacs_server.cache.stats import TierStats
from xlacs_server.config import Settings

log = logging.getLogger(__name__)

# A request waits at most this long on a Redis that does not answer (a stopped or partitioned one) before it
# goes on without L2. The socket timeout bounds each read, not a whole transfer: a big entry arriving steadily
# is never cut.
CONNECT_TIMEOUT_S = 0.5
SOCKET_TIMEOUT_S = 0.5
BACKOFF_MIN_S, BACKOFF_MAX_S = 0.25, 5.0  # after a failure, Redis is left alone this long, doubling
POLL_S = 0.05  # how often a replica waiting on another's lease looks whether it is gone

# Renew or drop the lease only while it is still ours: it may have expired and been taken by another replica.
_RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


def open_tier(settings: Settings) -> PersistentTier | None:
    """L2 when XLACS_REDIS_URL is set; without a secret that every replica shares it raises CacheConfigError."""
    if not settings.redis_url:
        return None
    store = RedisStore(settings.redis_url, settings.cache_key_prefix, settings.cache_ttl_s, settings.cache_lease_s)
    return PersistentTier(store, cache_secret(settings), settings.cache_max_entry_bytes)


def redacted(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


class RedisStore:
    """Entries under PREFIX + "entry:" + key, leases under PREFIX + "lease:" + key, blobs and graph manifests
    under PREFIX + "blob." and "manifest." + digest (redis_blobs.py). `stats.entries` and
    `stats.bytes` count what this replica wrote; Redis itself reports its memory and evictions."""
    tier = "l2"

    def __init__(self, url: str, prefix: str, ttl_s: int, lease_s: float):
        self.url = redacted(url)
        self.prefix = prefix
        self.ttl_s = ttl_s or None
        self.lease_ms = int(lease_s * 1000)
        self.stats = TierStats(self.tier)
        # No retries inside redis-py: on failure this store backs off as a whole (see call).
        self.client = redis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT_S,
                                           socket_timeout=SOCKET_TIMEOUT_S, retry=Retry(NoBackoff(), 0))
        self._renew = self.client.register_script(_RENEW)
        self._release = self.client.register_script(_RELEASE)
        self._state = threading.Lock()
        self._backoff_s = 0.0  # 0 while Redis answers
        self._retry_at = 0.0
        self._probing = False  # a call is finding out whether Redis answers again
        self._held: dict[str, tuple[str, threading.Event]] = {}  # leases held: name -> (token, renewal stop)
        if self.call("ping", self.client.ping) is not FAILED:
            log.info("cache tier l2: Redis at %s", self.url)

    def blob_store(self, settings: Settings) -> RedisBlobs:
        """Blobs and graph manifests beside the entries, over this connection (cache/redis_blobs.py)."""
        return RedisBlobs(self)

    def location(self, key: str) -> str:
        """The Redis key of the key's entry."""
        return self.prefix + "entry:" + key

    def get(self, key: str) -> bytes | None:
        name = self.location(key)
        blob = self.call("get", lambda: self.client.getex(name, ex=self.ttl_s) if self.ttl_s
                          else self.client.get(name))
        return None if blob is FAILED else blob

    def put(self, key: str, blob: bytes) -> None:
        if self.call("set", lambda: self.client.set(self.location(key), blob, ex=self.ttl_s)) \
                is not FAILED:
            self.stats.add(entries=1, bytes=len(blob))

    @contextlib.contextmanager
    def lease(self, key: str, checkpoint: Callable[[str], None]):
        """Yields True while this replica holds the key's lease (or Redis fails: then nobody coordinates);
        yields False once another replica's lease on the key has gone: its entry may be there now. While it
        waits, `checkpoint` may raise to stop the call."""
        name, token, stop = self.prefix + "lease:" + key, secrets.token_hex(16), threading.Event()
        with self._state:  # before it exists in Redis, so that close() never misses a lease this replica holds
            self._held[name] = (token, stop)
        acquired = self.call("lease", lambda: self.client.set(name, token, nx=True, px=self.lease_ms))
        if acquired is FAILED or not acquired:
            with self._state:
                self._held.pop(name, None)
        if acquired is FAILED:
            yield True
            return
        if not acquired:
            while self.call("lease wait", lambda: self.client.exists(name)) == 1:
                checkpoint("the end of another replica's compile")
                time.sleep(POLL_S)
            yield False
            return
        renewer = threading.Thread(target=self._keep, args=(name, token, stop), name=f"lease {key}", daemon=True)
        renewer.start()
        try:
            yield True
        finally:
            stop.set()
            renewer.join()
            with self._state:
                self._held.pop(name, None)
            self.call("lease release", lambda: self._release(keys=[name], args=[token]))

    def close(self) -> None:
        """Releases the leases still held (at shutdown, when compiles in flight are abandoned), so that other
        replicas need not wait for them to expire."""
        with self._state:
            held, self._held = self._held, {}
        for name, (token, stop) in held.items():
            stop.set()
            self.call("lease release", lambda: self._release(keys=[name], args=[token]))

    def _keep(self, name: str, token: str, stop: threading.Event) -> None:
        """Renews the lease while its holder compiles: only a crashed holder lets it expire."""
        while not stop.wait(self.lease_ms / 3000):
            if self.call("lease renewal", lambda: self._renew(keys=[name], args=[token, self.lease_ms])) == 0:
                log.warning("lease %s expired before its compile ended; another replica may compile too", name)
                return

    def call(self, what: str, command):
        """The command's result, or FAILED when Redis fails or is being left alone after a failure.

        A circuit breaker: after a failure every call skips Redis until the backoff ends; then one call probes
        it while the others keep skipping, so a stalled Redis costs one timeout per backoff, not one per call."""
        with self._state:
            if self._backoff_s:
                if self._probing or time.monotonic() < self._retry_at:
                    self.stats.add(skipped=1)
                    return FAILED
                self._probing = True
        try:
            result = command()
        except redis.RedisError as e:
            with self._state:
                self.stats.add(errors=1)
                if not self._backoff_s:
                    log.warning("Redis at %s failed (%s: %s); serving from L1 and compiling without L2 until it "
                                "answers again", self.url, what, e)
                self._backoff_s = min(max(2 * self._backoff_s, BACKOFF_MIN_S), BACKOFF_MAX_S)
                self._retry_at = time.monotonic() + self._backoff_s
            return FAILED
        finally:
            with self._state:
                self._probing = False
        with self._state:
            if self._backoff_s:
                log.info("Redis at %s answers again", self.url)
                self._backoff_s = 0.0
        return result
