"""HTTP content codings of the protocol's REST bodies, as tritonclient's request_compression_algorithm and
response_compression_algorithm use them: gzip and deflate (zlib framing)."""
from __future__ import annotations

import zlib

WBITS = {"gzip": 31, "deflate": 15}  # zlib's window bits for a Content-Encoding: gzip framing, zlib framing


def accepted(accept_encoding: str | None) -> str | None:
    """The coding to answer with: of gzip and deflate, the one the Accept-Encoding header prefers (the highest q;
    the first listed of equals), or None for the body as it is."""
    best, best_q = None, 0.0
    for item in (accept_encoding or "").split(","):
        coding, *params = (part.strip() for part in item.split(";"))
        q = next((_quality(p[2:]) for p in params if p.lower().startswith("q=")), 1.0)
        if coding.lower() in WBITS and q > best_q:
            best, best_q = coding.lower(), q
    return best


def _quality(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0  # a malformed weight accepts nothing rather than guess


def encoded(body: bytes, coding: str) -> bytes:
    compressor = zlib.compressobj(wbits=WBITS[coding])
    return compressor.compress(body) + compressor.flush()
