"""Same-host shared memory (docs/data_plane.md, Shared memory): arrays in a sealed memfd (or a POSIX shared-memory
object) that this client creates and the daemon opens, which an Execute reads as inputs and writes outputs into, so
that their bytes never travel through gRPC. For a client on the daemon's host (Linux).

    with Client("localhost:50051") as client, SharedMemory(client, 2 << 30) as shm:
        x = shm.array((1 << 26,), np.float32)   # a numpy view of the region
        x[:] = ...
        y = shm.array((1 << 26,), np.float32)
        executable.execute({"x:0": x}, out={"y:0": y})   # x by reference; the daemon writes y in place
"""
from __future__ import annotations

import fcntl
import mmap
import os
import secrets
from typing import Mapping, Protocol

import grpc
import numpy as np

from xlacs import dtypes
from xlacs.connection import Connection
from xlacs.v1 import xlacs_pb2

SHM_DIR = "/dev/shm"  # where Linux keeps POSIX shared-memory objects: shm_open("/k") is /dev/shm/k
ALIGNMENT = 64  # of each array placed in a region: what XLA:CPU wants of a buffer to use it without a copy


class Regions:
    """A client's session on the daemon (an OpenSession call kept open, opened on first use) and the SharedMemory
    regions registered in it; the daemon unmaps them all when the session ends (`close`, or the client goes)."""

    def __init__(self, stub):
        self._stub = stub
        self._call = None
        self.session_id = ""
        self.open: list[SharedMemory] = []

    def session(self) -> str:
        if self._call is None:
            call = self._stub.OpenSession(xlacs_pb2.OpenSessionRequest())  # no deadline: it lasts
            self.session_id = next(call).session_id
            self._call = call
        return self.session_id

    def ref(self, array) -> xlacs_pb2.SharedMemoryRef | None:
        """Where `array` lies in an open region, if it is a contiguous view of one."""
        if not self.open or not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
            return None
        return next((ref for ref in (shm.ref(array) for shm in self.open) if ref is not None), None)

    def reference(self, name: str, value) -> xlacs_pb2.Tensor | None:
        """The input `value` as a reference into its region if it is an array of an open region, else None."""
        ref = self.ref(value)
        if ref is None:
            return None
        return xlacs_pb2.Tensor(name=name, dtype=dtypes.from_numpy(value.dtype), shape=value.shape,
                                shared_memory=ref)

    def output_requests(self, out: Mapping[str, np.ndarray], names: list[str]) -> list[xlacs_pb2.OutputRequest]:
        """Outputs to write into arrays of open regions (Executable.execute's `out`)."""
        requests = []
        for name, target in out.items():
            if name not in names:
                raise ValueError(f"out names {name!r}, which is not an output; the outputs are {names}")
            ref = self.ref(target)
            if ref is None:
                raise ValueError(f"out[{name!r}] must be a contiguous array of an open SharedMemory of this client "
                                 "(SharedMemory.array)")
            requests.append(xlacs_pb2.OutputRequest(name=name, shared_memory=ref))
        return requests

    def close(self) -> None:
        """Ends the session: the daemon unmaps its regions, and each SharedMemory is unlinked here."""
        for shm in self.open:
            shm.unlink()
        self.open.clear()
        if self._call is not None:
            self._call.cancel()
            self._call, self.session_id = None, ""


class RegionsConnection(Connection, Protocol):
    """A Connection with its session of regions: what a SharedMemory is made with (xlacs.Client is one)."""
    regions: Regions


class SharedMemory:
    """`byte_size` bytes of shared memory registered with the daemon in the client's session: a new memfd sealed
    against shrinking and growing (`sealed`, the default where os.memfd_create exists), which the daemon maps, or a
    new POSIX shared-memory object (`sealed=False`, mode `mode`: the daemon's user must be able to read and write
    it), which it reads and writes with system calls (docs/data_plane.md, Shared memory). `array` places arrays in
    it; an input that is such an array travels by reference, and `Executable.execute(..., out={output: array})`
    has the daemon write the output into it. `close` (or the end of a `with` block) unregisters the region and
    unlinks the object; arrays still viewing it keep their memory until they go."""

    def __init__(self, client: RegionsConnection, byte_size: int, *, mode: int = 0o600,
                 sealed: bool = hasattr(os, "memfd_create")):
        if byte_size <= 0:
            raise ValueError(f"byte_size must be positive, not {byte_size}")
        self.name = f"xlacs-{os.getpid()}-{secrets.token_hex(8)}"
        self.byte_size = byte_size
        self.sealed = sealed
        self._client = client
        if sealed:  # named by its descriptor, open here until the daemon has opened it
            fd = os.memfd_create(self.name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            self.key = f"/proc/{os.getpid()}/fd/{fd}"
        else:
            self.key = "/" + self.name
            fd = os.open(SHM_DIR + self.key, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        try:
            try:
                os.ftruncate(fd, byte_size)
                if sealed:  # nobody can truncate it now, so the daemon can map it safely
                    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
                self._map = mmap.mmap(fd, byte_size)
            except BaseException:
                if not sealed:
                    os.unlink(SHM_DIR + self.key)
                raise
            self._bytes = np.frombuffer(self._map, np.uint8)
            self._base = self._bytes.__array_interface__["data"][0]
            self._used = 0
            regions = client.regions
            try:
                client.stub.RegisterSharedMemory(xlacs_pb2.RegisterSharedMemoryRequest(
                    session_id=regions.session(), name=self.name, key=self.key, offset=0, byte_size=byte_size),
                    timeout=client.timeout)
            except BaseException:
                self.unlink()
                raise
        finally:
            os.close(fd)  # the mappings (here and in the daemon) keep the object
        regions.open.append(self)

    def array(self, shape, dtype=np.float32) -> np.ndarray:
        """A new array of the region (uninitialized), after those placed before."""
        dtype = np.dtype(dtype)
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        start = -(-self._used // ALIGNMENT) * ALIGNMENT
        if start + size > self.byte_size:
            raise ValueError(f"{dtype}{list(shape)} needs {size} bytes, and {self.byte_size - start} of the region's "
                             f"{self.byte_size} are left; make the SharedMemory larger")
        self._used = start + size
        return self._bytes[start:start + size].view(dtype).reshape(shape)

    def put(self, array) -> np.ndarray:
        """A copy of `array` in the region."""
        array = np.asarray(array)
        placed = self.array(array.shape, array.dtype)
        placed[...] = array
        return placed

    def ref(self, array: np.ndarray) -> xlacs_pb2.SharedMemoryRef | None:
        """Where `array` (contiguous) lies in this region, if it does."""
        offset = array.__array_interface__["data"][0] - self._base
        if 0 <= offset and offset + array.nbytes <= self.byte_size:
            return xlacs_pb2.SharedMemoryRef(region=self.name, offset=offset, byte_size=array.nbytes)
        return None

    def close(self) -> None:
        regions = self._client.regions
        if self not in regions.open:
            return
        regions.open.remove(self)
        try:
            self._client.stub.UnregisterSharedMemory(xlacs_pb2.UnregisterSharedMemoryRequest(
                session_id=regions.session_id, name=self.name), timeout=self._client.timeout)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.NOT_FOUND:  # the session ended already: nothing is mapped
                raise
        finally:
            self.unlink()

    def unlink(self) -> None:
        """Unlinks the object (a memfd has no name to unlink) and unmaps it here (once no array views it)."""
        if not self.sealed:
            os.unlink(SHM_DIR + self.key)
        self._bytes = None
        try:
            self._map.close()
        except BufferError:  # arrays of the caller still view it: the mapping goes with the last of them
            pass

    def __enter__(self) -> "SharedMemory":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
