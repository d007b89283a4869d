"""Triton's binary tensor data extension: a body is the JSON object followed by the tensors' raw bytes (little-endian,
row-major, no padding), in the order of the tensors that carry a "binary_data_size" parameter; the header
Inference-Header-Content-Length gives the JSON's length. Sizes are checked against the shapes, naming the tensor:
a wrong size must be a client's error, never a misread of the next tensor's bytes."""
from __future__ import annotations

import json

import numpy as np

from xlacs_server.errors import InvalidRequest
from xlacs_server.inference import json_tensors

HEADER = "Inference-Header-Content-Length"
SIZE = "binary_data_size"
JSON_TYPE, BINARY_TYPE = "application/json", "application/octet-stream"


def split(body: bytes, header_length: str | None) -> tuple[bytes, memoryview]:
    """(the JSON object, the binary data after it) of a body; all JSON without the header."""
    if header_length is None:
        return body, memoryview(b"")
    try:
        length = int(header_length)
    except ValueError:
        length = -1
    if not 0 <= length <= len(body):
        raise InvalidRequest(f"{HEADER} is {header_length!r}: it must be the length in bytes of the JSON object at "
                             f"the start of the body (0 to the body's {len(body)} bytes)")
    return body[:length], memoryview(body)[length:]


def size_of(parameters: dict, what: str) -> int | None:
    """The "binary_data_size" parameter of an input (None: its data is JSON)."""
    size = parameters.get(SIZE)
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise InvalidRequest(f"{what}: parameter {SIZE!r} is {size!r}; it must be the tensor's byte count")
    return size


class Reader:
    """Hands out the binary data of a body's tensors in order."""

    def __init__(self, binary: memoryview):
        self.binary = binary
        self.offset = 0

    def tensor(self, size: int, dtype: np.dtype, shape: list[int], what: str) -> np.ndarray:
        expected = json_tensors.elements(shape) * dtype.itemsize
        if size != expected:
            raise InvalidRequest(f"{what}: {SIZE} is {size} bytes, but shape {shape} of {dtype.itemsize}-byte "
                                 f"elements takes {expected}")
        if self.offset + size > len(self.binary):
            raise InvalidRequest(f"{what}: the body ends {self.offset + size - len(self.binary)} bytes short of its "
                                 f"{size} bytes of binary data (after the JSON object of {HEADER} bytes)")
        data = self.binary[self.offset:self.offset + size]
        self.offset += size
        array = np.frombuffer(data, dtype.newbyteorder("<")).reshape(shape)
        if dtype.kind == "b" and array.view(np.uint8).max(initial=0) > 1:
            raise InvalidRequest(f"{what}: BOOL binary data holds bytes other than 0 and 1")
        return array

    def finish(self) -> None:
        """InvalidRequest if bytes are left over: the sizes and the body disagree."""
        if self.offset != len(self.binary):
            raise InvalidRequest(f"the body has {len(self.binary)} bytes of binary data after the JSON object, but "
                                 f"the inputs' {SIZE} parameters add up to {self.offset}")


def body(header: dict, chunks: list[bytes]) -> tuple[bytes, dict[str, str], str]:
    """(body, headers, media type) of a response: JSON alone, or JSON then `chunks` with the length header."""
    encoded = json.dumps(header, separators=(",", ":")).encode()
    if not chunks:
        return encoded, {}, JSON_TYPE
    return b"".join([encoded, *chunks]), {HEADER: str(len(encoded))}, BINARY_TYPE


def raw(array: np.ndarray) -> bytes:
    """The binary data of an output: little-endian, row-major."""
    return np.ascontiguousarray(array, array.dtype.newbyteorder("<")).tobytes()
