"""ExecuteStream from the client (docs/data_plane.md, "Unary and streamed Execute"): the inputs go in pieces
copied out of views of the arrays one at a time, and each output is put together into one array as its pieces
come, so that the call holds no tensor's bytes twice. Executable.execute streams the calls that move at least
STREAM_BYTES."""
from __future__ import annotations

import math
from typing import Iterable, Iterator, Mapping

import numpy as np

from xlacs import dtypes, tensors
from xlacs.v1 import xlacs_pb2

# Measured (docs/data_plane.md): from 1 MiB on, a streamed call is as fast as a unary one or faster, and its
# peak memory stays near the payload's; below, a stream's extra messages cost more than the copies it saves.
STREAM_BYTES = 1 << 20


def moved_bytes(inputs: Mapping[str, object], outputs: Iterable[xlacs_pb2.TensorSpec]) -> int:
    """The bytes a call sends and receives: its array inputs' and its outputs' (an unknown dimension counts as
    one)."""
    sent = sum(a.nbytes for a in inputs.values() if isinstance(a, np.ndarray))
    return sent + sum(math.prod(max(d, 1) for d in s.shape) * dtypes.to_numpy(s.dtype).itemsize for s in outputs)


def execute(stub, executable_id: str, inputs: Mapping[str, np.ndarray], timeout: float | None) -> list[np.ndarray]:
    """The outputs of one ExecuteStream call, in fetch order."""
    arrays = {}
    for name, array in inputs.items():  # refused here, not in the thread that sends the requests
        arrays[name] = tensors.little_endian(array)
        try:
            dtypes.from_numpy(arrays[name].dtype)
        except dtypes.UnsupportedDType as e:
            raise dtypes.UnsupportedDType(f"input {name!r} has {e}") from None
    assembly = tensors.Assembly("output")
    for response in stub.ExecuteStream(_requests(executable_id, arrays), timeout=timeout):
        for piece in response.outputs:
            assembly.add(piece)
    return [array for _, array in assembly.finish()]


def _requests(executable_id: str, arrays: dict[str, np.ndarray]) -> Iterator[xlacs_pb2.ExecuteRequest]:
    """A request per piece, the first naming the executable."""
    request = xlacs_pb2.ExecuteRequest(executable_id=executable_id)
    for name, array in arrays.items():
        for offset, content in tensors.pieces(array):
            tensors.fill_piece(request.inputs.add(), name, array, offset, content)
            yield request
            request = xlacs_pb2.ExecuteRequest()
    if request.executable_id:  # no inputs
        yield request
