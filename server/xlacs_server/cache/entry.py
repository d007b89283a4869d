"""The cache entry format: a versioned header, JSON metadata, a zstd body, and an HMAC-SHA256 over all of it.

    MAGIC (8) | format version (u32) | metadata length (u32) | metadata (JSON) | body (zstd) | HMAC (32)

The body is the serialized PJRT executable followed by its StableHLO text, then those of the prepare program
(compile/prepare.py), empty when the executable has none. The MAC covers the cache key as
well as the bytes, so a valid entry copied under another key is refused too. Nothing read from a tier is
parsed before its MAC checks, and nothing is ever unpickled.
"""
from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import struct
import time

import zstandard

from xlacs_server.compile.cache_key import CACHE_FORMAT_VERSION

MAGIC = b"XLACS\x00CE"
_PREFIX = struct.Struct(">8sII")
_MAC_BYTES = hashlib.sha256().digest_size


class RejectedEntry(Exception):
    """An entry that must be treated as a miss; `reason` is its metric label."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


@dataclasses.dataclass(frozen=True)
class Entry:
    key: str
    meta: dict  # JSON-able: the signature, compile stages, passes... (persistent.py fills it)
    executable: bytes  # native code: only ever loaded after the MAC checked
    stablehlo: str
    created: float = dataclasses.field(default_factory=time.time)
    prepare: bytes = b""  # the prepare program, native code too
    prepare_stablehlo: str = ""


def mac(secret: bytes, key: str, signed: bytes) -> bytes:
    """The HMAC-SHA256 of `signed` stored under `key` (an entry's cache key, a record's name)."""
    return hmac.new(secret, key.encode() + b"\x00" + signed, hashlib.sha256).digest()


def signed(secret: bytes, name: str, data: bytes) -> bytes:
    """A record kept beside the entries under `name` (cache/bindings.py, cache/prepared.py): `data`, then its MAC."""
    return data + mac(secret, name, data)


def verified(secret: bytes, name: str, data: bytes) -> bytes | None:
    """The data of a `signed` record, or None when its MAC does not match `name` and the secret."""
    body, tag = data[:-_MAC_BYTES], data[-_MAC_BYTES:]
    if len(data) < _MAC_BYTES or not hmac.compare_digest(tag, mac(secret, name, body)):
        return None
    return body


_PARTS = ("executable", "stablehlo", "prepare", "prepare_stablehlo")  # the body's parts, in order
_TEXT = ("stablehlo", "prepare_stablehlo")


def encode(entry: Entry, secret: bytes) -> bytes:
    parts = {name: getattr(entry, name).encode() if name in _TEXT else getattr(entry, name) for name in _PARTS}
    body = zstandard.ZstdCompressor().compress(b"".join(parts.values()))
    meta = json.dumps({**entry.meta, "key": entry.key, "created": entry.created,
                       "sizes": {**{name: len(part) for name, part in parts.items()}, "body": len(body)}},
                      sort_keys=True).encode()
    signed = _PREFIX.pack(MAGIC, CACHE_FORMAT_VERSION, len(meta)) + meta + body
    return signed + mac(secret, entry.key, signed)


def decode(blob: bytes, key: str, secret: bytes) -> Entry:
    """The entry stored under `key`, or RejectedEntry: truncated, foreign, mac or malformed."""
    if len(blob) < _PREFIX.size + _MAC_BYTES:
        raise RejectedEntry("truncated", f"{len(blob)} bytes is shorter than any entry")
    magic, version, meta_len = _PREFIX.unpack_from(blob)
    if magic != MAGIC:
        raise RejectedEntry("foreign", f"not an xlacs cache entry (starts with {magic!r})")
    if version != CACHE_FORMAT_VERSION:
        raise RejectedEntry("foreign", f"format version {version}, this server reads {CACHE_FORMAT_VERSION}")
    signed, tag = blob[:-_MAC_BYTES], blob[-_MAC_BYTES:]
    if _PREFIX.size + meta_len > len(signed):
        raise RejectedEntry("truncated", f"metadata of {meta_len} bytes does not fit in {len(blob)} bytes")
    if not hmac.compare_digest(tag, mac(secret, key, signed)):
        raise RejectedEntry("mac", "the HMAC does not match: written under another secret, or altered")
    try:
        meta = json.loads(signed[_PREFIX.size:_PREFIX.size + meta_len])
        sizes, stored_key, created = meta.pop("sizes"), meta.pop("key"), meta.pop("created")
        size = sum(sizes[name] for name in _PARTS)
        body = zstandard.ZstdDecompressor().decompress(signed[_PREFIX.size + meta_len:], max_output_size=size)
        if stored_key != key or len(body) != size:
            raise ValueError(f"the entry names key {stored_key!r} and {size} body bytes; it has {len(body)}")
        parts, start = {}, 0
        for name in _PARTS:
            part, start = body[start:start + sizes[name]], start + sizes[name]
            parts[name] = part.decode() if name in _TEXT else part
        return Entry(key, meta, created=created, **parts)
    except (ValueError, KeyError, TypeError, AttributeError, zstandard.ZstdError) as e:
        raise RejectedEntry("malformed", str(e)) from None
