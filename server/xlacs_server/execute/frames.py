"""Messages between the daemon and its execution workers: a JSON header and raw buffers, never pickles.

    header length (u32, little-endian) | header (JSON) | buffer 0 | buffer 1 | ...

The header's "buffers" lists each buffer's byte length; arrays travel as dtype and shape in the header plus
their bytes, as on the wire of the public API.
"""
from __future__ import annotations

import json
import struct

import numpy as np

from xlacs import dtypes

_LENGTH = struct.Struct("<I")


def encode(header: dict, buffers: list[bytes | memoryview] = ()) -> bytes:
    views = [memoryview(b) for b in buffers]
    head = json.dumps({**header, "buffers": [v.nbytes for v in views]}).encode()
    return b"".join([_LENGTH.pack(len(head)), head, *views])


def decode(message: bytes) -> tuple[dict, list[memoryview]]:
    (length,) = _LENGTH.unpack_from(message)
    header = json.loads(message[_LENGTH.size:_LENGTH.size + length])
    view, offset, buffers = memoryview(message), _LENGTH.size + length, []
    for size in header.pop("buffers"):
        buffers.append(view[offset:offset + size])
        offset += size
    return header, buffers


def array_specs(arrays: list[np.ndarray]) -> list[list]:
    return [[a.dtype.name, list(a.shape)] for a in arrays]


def array_bytes(arrays: list[np.ndarray]) -> list[memoryview]:
    return [memoryview(dtypes.byte_view(a)) for a in arrays]


def arrays(specs: list[list], buffers: list[memoryview]) -> list[np.ndarray]:
    return [np.frombuffer(b, dtype=np.dtype(dtype)).reshape(shape) for (dtype, shape), b in zip(specs, buffers)]
