"""numpy arrays <-> xlacs.v1.Tensor: dtype, shape and raw little-endian bytes; never pickles. A tensor travels
whole in one Tensor, or (ExecuteStream, docs/data_plane.md) as consecutive pieces of one name, each with the offset
of its bytes, copied out of a view of the array one at a time and written into one array as they come."""
from __future__ import annotations

import math
from typing import Callable, Iterator

import numpy as np

from xlacs import dtypes
from xlacs.v1 import xlacs_pb2


def fill(tensor: xlacs_pb2.Tensor, name: str, array) -> xlacs_pb2.Tensor:
    """Writes `array` into `tensor`, usually a repeated field's `.add()`: a Tensor built apart and then put in
    its request copies all of its bytes again (docs/benchmarks.md, tensor transfer). Raises UnsupportedDType
    for a dtype xlacs does not carry (strings, ...)."""
    described, content = head(name, array)
    tensor.MergeFrom(described)
    tensor.content = content.tobytes()
    return tensor


def head(name: str, array) -> tuple[xlacs_pb2.Tensor, np.ndarray]:
    """`array` as xlacs.wire.encode takes it: a Tensor with its name, dtype and shape, and its little-endian bytes
    (a flat view, copied only when the array is not contiguous). Raises UnsupportedDType as `fill` does."""
    array = little_endian(array)
    return (xlacs_pb2.Tensor(name=name, dtype=dtypes.from_numpy(array.dtype), shape=array.shape),
            dtypes.byte_view(array))


def little_endian(array) -> np.ndarray:
    array = np.asarray(array)
    return array.astype(array.dtype.newbyteorder("<")) if array.dtype.byteorder == ">" else array


def to_proto(name: str, array) -> xlacs_pb2.Tensor:
    return fill(xlacs_pb2.Tensor(), name, array)


def from_proto(tensor: xlacs_pb2.Tensor) -> np.ndarray:
    """A read-only array on one copy of the tensor's bytes. Raises ValueError when size and shape disagree, and
    UnsupportedDType for a dtype xlacs does not carry."""
    dtype, shape, expected = _layout(tensor, "tensor")
    content = tensor.content  # each read of a bytes field copies it out of the message
    if len(content) != expected:
        raise ValueError(_size_error("tensor", tensor.name, len(content), shape, dtype, expected))
    return np.frombuffer(content, dtype=dtype).reshape(shape)


def from_view(tensor: xlacs_pb2.Tensor, content) -> np.ndarray:
    """The array of a Tensor whose bytes came apart from it (`content`, a view: xlacs.wire.decode), copied once into
    memory aligned as PJRT takes it without a copy. Raises as `from_proto` does."""
    dtype, shape, expected = _layout(tensor, "tensor")
    if len(content) != expected:
        raise ValueError(_size_error("tensor", tensor.name, len(content), shape, dtype, expected))
    array = _aligned_empty(expected)
    array[:] = np.frombuffer(content, np.uint8)
    return array.view(dtype).reshape(shape)


def _layout(tensor: xlacs_pb2.Tensor, what: str) -> tuple[np.dtype, tuple[int, ...], int]:
    """(dtype, shape, byte size) that a tensor's dtype and shape declare."""
    try:
        dtype = dtypes.to_numpy(tensor.dtype)
    except dtypes.UnsupportedDType as e:
        raise dtypes.UnsupportedDType(f"{what} {tensor.name!r} has {e}") from None
    shape = tuple(tensor.shape)
    if shape and min(shape) < 0:
        raise ValueError(f"{what} {tensor.name!r} has a negative dimension in shape {list(shape)}")
    return dtype, shape, math.prod(shape) * dtype.itemsize


def _size_error(what: str, name: str, size: int, shape: tuple[int, ...], dtype: np.dtype, expected: int) -> str:
    return f"{what} {name!r} carries {size} bytes but its shape {list(shape)} of {dtype} needs {expected}"


PIECE_BYTES = 4 << 20  # docs/data_plane.md: big enough that a piece's overhead is small, small enough to reuse memory


def pieces(array: np.ndarray, piece_bytes: int = PIECE_BYTES) -> Iterator[tuple[int, memoryview]]:
    """(offset, view) of the consecutive pieces of a little-endian array's bytes; an empty array is one empty
    piece."""
    view = dtypes.byte_view(array)
    for offset in range(0, max(view.size, 1), piece_bytes):
        yield offset, view[offset:offset + piece_bytes].data


def fill_piece(tensor: xlacs_pb2.Tensor, name: str, array: np.ndarray, offset: int,
               content: memoryview | None) -> None:
    """Writes a piece of `array` into `tensor` (its content copied in, unless None: xlacs.wire writes it): the
    first (offset 0) carries dtype and shape too."""
    tensor.name, tensor.offset = name, offset
    if content is not None:
        tensor.content = bytes(content)
    if not offset:
        tensor.dtype = dtypes.from_numpy(array.dtype)
        tensor.shape.extend(array.shape)


ALIGN = 64  # PJRT's CPU client takes a host array this aligned without copying it (docs/data_plane.md)


def _aligned_empty(nbytes: int) -> np.ndarray:
    """Uninitialized bytes starting at a multiple of ALIGN (numpy's large arrays start 16 bytes into a page)."""
    raw = np.empty(nbytes + ALIGN, np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start:start + nbytes]


class Assembly:
    """Tensors put together from consecutive pieces: each written into one array allocated at its first piece
    (offset 0, with dtype and shape), in the order they came. A piece continues the tensor before it when it has
    its name (and is not a new offset 0 after it is complete). `start(name, dtype, shape, nbytes)` runs before
    each allocation and may refuse the tensor. A piece out of place (a gap, an overlap, past the end, another dtype
    or shape) or a tensor whose bytes do not fill its shape raises ValueError naming it as `what` ("input")."""

    def __init__(self, what: str, start: Callable[[str, np.dtype, tuple[int, ...], int], None] = lambda *_: None):
        self.what = what
        self.tensors: list[tuple[str, np.ndarray]] = []
        self._start = start
        self._bytes = np.empty(0, np.uint8)  # the last tensor's bytes, flat
        self._filled = 0

    def add(self, piece: xlacs_pb2.Tensor, content=None) -> None:
        """Writes a piece in place; its `content` is piece.content unless given apart (a view, xlacs.wire)."""
        last = self.tensors[-1] if self.tensors else None
        if last is None or piece.name != last[0] or (piece.offset == 0 and self._filled == self._bytes.size):
            self._check_filled()
            last = self._begin(piece)
        name, array = last
        if piece.dtype not in (0, dtypes.from_numpy(array.dtype)) or (piece.shape and tuple(piece.shape) != array.shape):
            raise ValueError(f"{self.what} {name!r}: a piece at offset {piece.offset} has "
                             f"{dtypes.dtype_name(piece.dtype)}{list(piece.shape)}, its first piece "
                             f"{array.dtype}{list(array.shape)}; later pieces carry the same or none")
        if piece.offset != self._filled:
            how = "leaves a gap after" if piece.offset > self._filled else "overlaps"
            raise ValueError(f"{self.what} {name!r}: a piece at offset {piece.offset} {how} the {self._filled} bytes "
                             "received; pieces follow one another in order")
        content = piece.content if content is None else content
        end = piece.offset + len(content)
        if end > self._bytes.size:
            raise ValueError(f"{self.what} {name!r}: a piece at offset {piece.offset} of {len(content)} bytes ends at "
                             f"{end}, past the {self._bytes.size} bytes of {array.dtype}{list(array.shape)}")
        self._bytes[piece.offset:end] = np.frombuffer(content, np.uint8)
        self._filled = end

    def finish(self) -> list[tuple[str, np.ndarray]]:
        """The tensors, in order, once the last one is complete."""
        self._check_filled()
        return self.tensors

    def _begin(self, piece: xlacs_pb2.Tensor) -> tuple[str, np.ndarray]:
        if piece.offset:
            raise ValueError(f"{self.what} {piece.name!r}: its first piece is at offset {piece.offset}; a tensor's "
                             "first piece has offset 0, its dtype and its shape")
        dtype, shape, nbytes = _layout(piece, self.what)
        self._start(piece.name, dtype, shape, nbytes)
        array = _aligned_empty(nbytes).view(dtype).reshape(shape)
        self._bytes, self._filled = array.reshape(-1).view(np.uint8), 0
        self.tensors.append((piece.name, array))
        return self.tensors[-1]

    def _check_filled(self) -> None:
        if self._filled != self._bytes.size:
            name, array = self.tensors[-1]
            raise ValueError(_size_error(self.what, name, self._filled, array.shape, array.dtype, self._bytes.size))
