"""The HMAC key of cache entries: XLACS_CACHE_SECRET, a file, or, for the directory tier alone, one generated
outside the directory it protects.

Whoever can write a secret can sign entries that every process using it will load and run, so a secret
never lives in the cache directory, and a secret file or cache directory that others than its owner can
write is refused at start, as ssh refuses loose key files (docs/security.md, "Trust model").
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import secrets
import stat

import grpc

from xlacs_server.config import Settings
from xlacs_server.errors import XlacsError

MIN_SECRET_BYTES = 16
MAX_SECRET_FILE_BYTES = 4096


class CacheConfigError(XlacsError):
    """The cache tier is configured in a way that cannot work; raised at start, never during a request."""
    code = grpc.StatusCode.FAILED_PRECONDITION


def generated_secret_path(environ=os.environ) -> pathlib.Path:
    """Where the directory tier keeps a generated secret: the user's config directory, not the cache's."""
    config = environ.get("XDG_CONFIG_HOME") or pathlib.Path.home() / ".config"
    return pathlib.Path(config) / "xlacs" / "cache-secret"


def cache_secret(settings: Settings, directory: pathlib.Path | None = None) -> bytes:
    """The configured secret; without one, for the directory tier (`directory`), the generated one."""
    if settings.cache_secret and settings.cache_secret_file:
        raise CacheConfigError("set one of XLACS_CACHE_SECRET and XLACS_CACHE_SECRET_FILE, not both")
    if settings.cache_secret:
        secret = settings.cache_secret.encode()
    elif settings.cache_secret_file:
        secret = _read(pathlib.Path(settings.cache_secret_file).expanduser(), directory)
    elif directory is not None:
        path = generated_secret_path()
        if not path.exists():
            _generate(path)
        secret = _read(path, directory)
    else:
        raise CacheConfigError("the Redis cache tier needs a secret that every replica shares: set "
                               "XLACS_CACHE_SECRET or XLACS_CACHE_SECRET_FILE (--cache-secret-file); see docs/cache.md")
    if len(secret) < MIN_SECRET_BYTES:
        raise CacheConfigError(f"the cache secret has {len(secret)} bytes; use at least {MIN_SECRET_BYTES}, "
                               "e.g. `openssl rand -hex 32`")
    return secret


def secret_id(secret: bytes) -> str:
    """A name for the secret that does not reveal it: deployments with different secrets that share a Redis
    or a directory keep their entries apart under it."""
    return hashlib.sha256(b"xlacs cache secret id\x00" + secret).hexdigest()[:16]


def check_not_loose(path: pathlib.Path, what: str, st: os.stat_result) -> None:
    """Refuses a file or directory that users other than its owner may write."""
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheConfigError(f"{what} {path} is writable by its group or by others (mode "
                               f"{stat.S_IMODE(st.st_mode):o}): they could plant cache entries; "
                               f"run `chmod go-w {path}`")


def _read(path: pathlib.Path, directory: pathlib.Path | None) -> bytes:
    """The secret in `path`. A mounted secret may be a link (Kubernetes mounts them so): its target is read,
    and must be a small regular file that only its owner can write, outside the cache directory."""
    real = path.resolve()
    if directory is not None and real.is_relative_to(directory.resolve()):
        raise CacheConfigError(f"the cache secret {path} is inside the cache directory {directory}: whoever can "
                               "write the directory could replace it; keep the secret elsewhere")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise CacheConfigError(f"cannot read the cache secret file {path}: {e}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SECRET_FILE_BYTES:
            raise CacheConfigError(f"the cache secret file {path} must be a regular file of at most "
                                   f"{MAX_SECRET_FILE_BYTES} bytes")
        check_not_loose(path, "the cache secret file", st)
        return f.read(MAX_SECRET_FILE_BYTES).strip()


def _generate(path: pathlib.Path) -> None:
    """Writes a random secret to `path` (owner-only, in an owner-only directory), unless another process that
    shares it got there first: then its secret wins."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_hex(32).encode())
    try:
        os.link(tmp, path)  # atomic, and fails if another process got there first
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
