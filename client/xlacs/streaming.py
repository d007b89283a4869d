"""ExecuteStream from the client (docs/data_plane.md, "Unary and streamed Execute"): the inputs go in pieces
copied out of views of the arrays one at a time, and each output is put together into one array as its pieces
come, so that the call holds no tensor's bytes twice; xlacs.wire writes and reads each piece's content with one
copy. Executable.execute streams the calls that move at least STREAM_BYTES.

The client's peak memory while a call streams stays near the output arrays it fills (docs/data_plane.md, "The
client's memory"): the channel's fixed receive window (CHANNEL_OPTIONS) bounds the pieces gRPC holds before Python
reads them."""
from __future__ import annotations

import math
from typing import Iterable, Iterator, Mapping

import numpy as np

from xlacs import dtypes, tensors, wire
from xlacs.v1 import xlacs_pb2

METHOD = "/xlacs.v1.Compiler/ExecuteStream"

# Measured (docs/data_plane.md, 2026-11-28, AMD EPYC with AVX-512, with Execute's tensors written once): unary took
# 0.79-0.81x the stream's time at 1 MiB one way, 0.80-0.89x at 2 MiB, 0.85-0.95x at 4 MiB, 0.83x at 1 MiB each way
# and 0.97x at 2 MiB each way; the stream took 0.95x at 4 MiB each way and 0.42-0.84x at 8 MiB. Below 4 MiB moved, a
# stream's extra messages cost more than the copies it saves.
STREAM_BYTES = 4 << 20

# Without them gRPC grows a stream's window by its bandwidth estimate (BDP probes) and takes in as many of the
# daemon's pieces as it will hold before Python reads them: a 64 MiB output arrived with up to 2.14x the payload in
# the client's peak, against at most 1.80x with this window of two pieces (docs/data_plane.md).
CHANNEL_OPTIONS = [("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 2 * tensors.PIECE_BYTES)]

def output_bytes(outputs: Iterable[xlacs_pb2.TensorSpec]) -> int:
    """The bytes of a signature's outputs (an unknown dimension counts as one)."""
    return sum(math.prod(max(d, 1) for d in s.shape) * dtypes.to_numpy(s.dtype).itemsize for s in outputs)


def moved_bytes(inputs: Mapping[str, object], output_bytes: int) -> int:
    """The bytes a call sends and receives: its array inputs' and its outputs' (`output_bytes`)."""
    return output_bytes + sum(a.nbytes for a in inputs.values() if isinstance(a, np.ndarray))


def execute(channel, executable_id: str, inputs: Mapping[str, np.ndarray],
            timeout: float | None) -> list[np.ndarray]:
    """The outputs of one ExecuteStream call on `channel`, in fetch order."""
    arrays = {}
    for name, array in inputs.items():  # refused here, not in the thread that sends the requests
        arrays[name] = tensors.little_endian(array)
        try:
            dtypes.from_numpy(arrays[name].dtype)
        except dtypes.UnsupportedDType as e:
            raise dtypes.UnsupportedDType(f"input {name!r} has {e}") from None
    call = channel.stream_stream(METHOD, request_serializer=wire.as_is, response_deserializer=_pieces)
    assembly = tensors.Assembly("output")
    for pieces in call(_requests(executable_id, arrays), timeout=timeout):
        for piece, content in pieces:
            assembly.add(piece, content)
    return [array for _, array in assembly.finish()]


def _requests(executable_id: str, arrays: dict[str, np.ndarray]) -> Iterator[bytes]:
    """A serialized request per piece, the first naming the executable."""
    request = xlacs_pb2.ExecuteRequest(executable_id=executable_id)
    for name, array in arrays.items():
        for offset, content in tensors.pieces(array):
            piece = xlacs_pb2.Tensor()
            tensors.fill_piece(piece, name, array, offset, None)
            yield wire.encode(request, xlacs_pb2.ExecuteRequest.INPUTS_FIELD_NUMBER, [(piece, content)])
            request = xlacs_pb2.ExecuteRequest()
    if request.executable_id:  # no inputs
        yield request.SerializeToString()


def _pieces(data: bytes) -> list[tuple[xlacs_pb2.Tensor, memoryview]]:
    return wire.decode(data, xlacs_pb2.ExecuteResponse, xlacs_pb2.ExecuteResponse.OUTPUTS_FIELD_NUMBER)[1]
