"""Resident tensors (docs/data_plane.md): outputs an Execute kept on the daemon's device, named by a handle, that
later Executes take as inputs without sending their bytes either way."""
from __future__ import annotations

import dataclasses
from typing import Iterable

import numpy as np

from xlacs import dtypes, tensors
from xlacs.connection import Connection
from xlacs.v1 import xlacs_pb2


@dataclasses.dataclass(frozen=True)
class ResidentTensor:
    """An output kept on the daemon: pass it as an input of any Executable of the same client (its daemon), read
    it with `fetch()`, free it with `free()`, or let its time to live run out. The handle is a capability: whoever
    holds it can read the tensor."""
    handle: str
    name: str  # the output it was
    dtype: np.dtype
    shape: tuple[int, ...]
    client: Connection = dataclasses.field(repr=False, compare=False)  # the Client whose daemon keeps it

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def fetch(self) -> np.ndarray:
        """Its value, copied to this process; it stays on the daemon."""
        return fetch_tensors(self.client, [self])[0]

    def free(self) -> bool:
        """Frees it on the daemon now; False if it was gone already (freed, or its time to live ran out)."""
        return free_tensors(self.client, [self])[0] == 1


def output_requests(names: Iterable[str], keep: bool | str | Iterable[str],
                    ttl_s: float) -> list[xlacs_pb2.OutputRequest]:
    """What an Execute asks of its outputs `names`: keep all of them (True), the one or those named, or none."""
    kept = set(names) if keep is True else {keep} if isinstance(keep, str) else set(keep or ())
    unknown = sorted(kept - set(names))
    if unknown:
        raise ValueError(f"keep names {unknown}, which are not outputs; the outputs are {list(names)}")
    return [xlacs_pb2.OutputRequest(name=name, keep=True, ttl_s=ttl_s) for name in names if name in kept]


def input_piece(name: str, value) -> tuple[xlacs_pb2.Tensor, np.ndarray | None]:
    """An input as xlacs.wire.encode takes it: a ResidentTensor by its handle (no bytes), anything else as an
    array's dtype, shape and bytes."""
    if isinstance(value, ResidentTensor):
        return xlacs_pb2.Tensor(name=name, handle=value.handle), None
    return tensors.head(name, value)


def output(connection: Connection, tensor: xlacs_pb2.Tensor, content=None) -> np.ndarray | ResidentTensor:
    """An output of an Execute on `connection`: its array (from `content` when its bytes were read apart from it,
    xlacs.wire.read), or the ResidentTensor of a kept one."""
    if tensor.handle:
        return ResidentTensor(tensor.handle, tensor.name, dtypes.to_numpy(tensor.dtype), tuple(tensor.shape),
                              connection)
    return tensors.from_proto(tensor) if content is None else tensors.from_view(tensor, content)


def fetch_tensors(connection: Connection, resident_tensors: Iterable[ResidentTensor]) -> list[np.ndarray]:
    """The values of resident tensors, copied here in one call; they stay on the daemon."""
    response = connection.stub.FetchTensors(
        xlacs_pb2.FetchTensorsRequest(handles=[t.handle for t in resident_tensors]), timeout=connection.timeout)
    return [tensors.from_proto(t) for t in response.tensors]


def free_tensors(connection: Connection, resident_tensors: Iterable[ResidentTensor]) -> tuple[int, int]:
    """Frees resident tensors on the daemon in one call: (tensors, bytes) freed, without those already gone."""
    response = connection.stub.FreeTensors(
        xlacs_pb2.FreeTensorsRequest(handles=[t.handle for t in resident_tensors]), timeout=connection.timeout)
    return response.tensors, response.bytes
