"""The HMAC key of cache entries: XLACS_CACHE_SECRET, a file, or, for the directory tier alone, a generated one."""
from __future__ import annotations

import os
import pathlib
import secrets

import grpc

from xlacs_server.config import Settings
from xlacs_server.errors import XlacsError

MIN_SECRET_BYTES = 16


class CacheConfigError(XlacsError):
    """The cache tier is configured in a way that cannot work; raised at start, never during a request."""
    code = grpc.StatusCode.FAILED_PRECONDITION


def cache_secret(settings: Settings, directory: pathlib.Path | None = None) -> bytes:
    """The configured secret; without one, the secret kept in `directory` (made on first use), if given."""
    if settings.cache_secret and settings.cache_secret_file:
        raise CacheConfigError("set one of XLACS_CACHE_SECRET and XLACS_CACHE_SECRET_FILE, not both")
    if settings.cache_secret:
        secret = settings.cache_secret.encode()
    elif settings.cache_secret_file:
        try:
            secret = pathlib.Path(settings.cache_secret_file).read_bytes().strip()
        except OSError as e:
            raise CacheConfigError(f"cannot read the cache secret file {settings.cache_secret_file!r}: {e}") from None
    elif directory is not None:
        secret = _kept_in(directory / "secret")
    else:
        raise CacheConfigError("the Redis cache tier needs a secret that every replica shares: set "
                               "XLACS_CACHE_SECRET or XLACS_CACHE_SECRET_FILE (--cache-secret-file); see docs/cache.md")
    if len(secret) < MIN_SECRET_BYTES:
        raise CacheConfigError(f"the cache secret has {len(secret)} bytes; use at least {MIN_SECRET_BYTES}, "
                               "e.g. `openssl rand -hex 32`")
    return secret


def _kept_in(path: pathlib.Path) -> bytes:
    """The secret in `path`, written once (owner-only) by whichever process sharing the directory comes first."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".secret.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_hex(32).encode())
        try:
            os.link(tmp, path)  # atomic, and fails if another process got there first: then its secret wins
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return path.read_bytes().strip()
