"""Compile remote, run local (docs/data_plane.md): an executable downloaded from the daemon (DownloadExecutable)
and run in this process by this process's jaxlib, called as xlacs.Executable is: numpy in, numpy out.

The program is native code, so every blob is checked against its digest before anything runs, and bytes that are
not the daemon's are refused naming the blob. The program runs here only where the platform, its version and the
jaxlib that compiled it are this process's; elsewhere the executable says which differ (`reason`, and a
RuntimeWarning) and calls the daemon (`runs == "remote"`). jax is imported only when a download runs: it is the
client's `local` extra (pip install 'xlacs[local]'), and the rest of the client runs without it.
"""
from __future__ import annotations

import collections
import dataclasses
import hashlib
import threading
import warnings
from typing import Callable, Mapping, Sequence

import numpy as np

from xlacs import dtypes
from xlacs.connection import Connection
from xlacs.digests import key
from xlacs.v1 import xlacs_pb2

LOCAL, REMOTE = "local", "remote"
# Weight bytes a client remembers for later downloads; beyond this the least recently used are forgotten.
MEMO_BYTES = 1 << 30
RUNTIME_FIELDS = ("platform", "platform_version", "jaxlib_version")
# How the daemon runs an executable (xlacs.Executable.execute): a LocalExecutable that cannot run here calls it.
Remote = Callable[[Mapping[str, np.ndarray] | Sequence[np.ndarray]], list]


class BlobMismatch(ValueError):
    """A blob (downloaded, or remembered from an earlier download) whose bytes do not hash to its digest."""


class BlobMemo:
    """The weight blobs of earlier downloads by digest, up to `max_bytes`: a download names them all in `have`,
    and the daemon sends only the others. Each is checked against its digest again whenever it is used."""

    def __init__(self, max_bytes: int = MEMO_BYTES):
        self.max_bytes = max_bytes
        self._blobs: collections.OrderedDict[tuple[str, int], bytes | bytearray] = collections.OrderedDict()
        self._lock = threading.Lock()  # a client may download from several threads

    def digests(self) -> list[xlacs_pb2.Digest]:
        with self._lock:
            return [xlacs_pb2.Digest(hash=h, size_bytes=size) for h, size in self._blobs]

    def get(self, digest: xlacs_pb2.Digest) -> bytes | bytearray | None:
        with self._lock:
            data = self._blobs.get(key(digest))
            if data is not None:
                self._blobs.move_to_end(key(digest))
            return data

    def put(self, digest: xlacs_pb2.Digest, data: bytes | bytearray) -> None:
        with self._lock:
            self._blobs[key(digest)] = data
            self._blobs.move_to_end(key(digest))
            while sum(size for _, size in self._blobs) > self.max_bytes:
                self._blobs.popitem(last=False)


@dataclasses.dataclass
class DownloadReport:
    """What a download moved: the blobs the daemon sent (the program, and the weights the memo lacked) and
    those taken from the memo."""
    received_blobs: list[xlacs_pb2.Digest] = dataclasses.field(default_factory=list)
    received_bytes: int = 0
    remembered_blobs: int = 0
    remembered_bytes: int = 0


class LocalExecutable:
    """An executable run in this process (`runs == "local"`), or through the daemon when this process cannot
    run its program (`runs == "remote"`, and `reason` says which versions differ). Call it with numpy arrays in
    feed order, or a {feed: array} dict; outputs come back in fetch order."""

    def __init__(self, remote: Remote, package: xlacs_pb2.ExecutablePackage, report: DownloadReport,
                 reason: str = "", program=None, place=None, weights: Sequence = ()):
        self._remote = remote
        self.package = package
        self.id = package.executable_id
        self.signature = package.signature
        self.input_names = [s.name for s in package.signature.inputs]
        self.output_names = [s.name for s in package.signature.outputs]
        self.download = report
        self.reason = reason
        self.runs = REMOTE if reason else LOCAL
        self._program, self._place, self._weights = program, place, list(weights)
        self._inputs = [(s.name, dtypes.to_numpy(s.dtype), tuple(s.shape)) for s in package.signature.inputs]

    def execute(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> list[np.ndarray]:
        """Outputs in fetch order."""
        if self.runs == REMOTE:
            return self._remote(inputs)
        results = self._program.execute_sharded([*self._place(self._checked(inputs)), *self._weights])
        return [np.asarray(shards[0]) for shards in results.disassemble_into_single_device_arrays()]

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        return self.execute(arrays)

    def _checked(self, inputs) -> list[np.ndarray]:
        """The inputs in signature order; ValueError naming an unknown, missing or mistyped one, as the daemon
        refuses them (the program itself checks nothing)."""
        if not isinstance(inputs, Mapping):
            inputs = dict(zip(self.input_names, inputs, strict=True))
        if inputs.keys() != set(self.input_names):
            raise ValueError(f"executable {self.id} takes inputs {sorted(self.input_names)}; unknown: "
                             f"{sorted(set(inputs) - set(self.input_names))}, "
                             f"missing: {sorted(set(self.input_names) - set(inputs))}")
        ordered = []
        for name, dtype, shape in self._inputs:
            array = np.asarray(inputs[name])
            if array.dtype != dtype or array.shape != shape:
                raise ValueError(f"input {name!r}: expected {dtype}{list(shape)}, got {array.dtype}{list(array.shape)}")
            ordered.append(array)
        return ordered


def runtime(platform: str) -> dict[str, str]:
    """This process's platform, its version and jaxlib's, as a package names them; ImportError without jax,
    RuntimeError when jax has no `platform` device."""
    import jax
    import jaxlib
    device = jax.devices(platform)[0]
    return {"platform": device.platform, "platform_version": device.client.platform_version,
            "jaxlib_version": jaxlib.__version__}


def differences(package: xlacs_pb2.ExecutablePackage) -> str:
    """Why this process cannot run the package's program ("" when it can): the versions that differ."""
    try:
        here = runtime(package.platform)
    except ImportError as e:
        return f"jax is not installed here ({e}): pip install 'xlacs[local]'"
    except RuntimeError as e:
        return f"no {package.platform} device here: {e}"
    return "; ".join(f"{field} {getattr(package, field)!r} on the daemon, {here[field]!r} here"
                     for field in RUNTIME_FIELDS if getattr(package, field) != here[field])


def verified(name: str, digest: xlacs_pb2.Digest, data) -> None:
    """BlobMismatch naming the blob unless `data` hashes to `digest`."""
    got = hashlib.sha256(data).hexdigest()
    if got != digest.hash or len(data) != digest.size_bytes:
        raise BlobMismatch(f"blob of {name} ({digest.hash}, {digest.size_bytes} bytes) does not match its digest: "
                           f"its {len(data)} bytes hash to {got}; nothing was run")


def download(connection: Connection, executable_id: str, memo: BlobMemo, remote: Remote) -> LocalExecutable:
    """The executable downloaded from `connection`'s daemon (the weights `memo` holds are not sent again), checked
    and loaded here, or a LocalExecutable that calls `remote` when this process cannot run it (with a RuntimeWarning
    saying why)."""
    responses = connection.stub.DownloadExecutable(
        xlacs_pb2.DownloadExecutableRequest(executable_id=executable_id, have=memo.digests()),
        timeout=connection.timeout)
    package = next(responses).package
    report = DownloadReport()
    reason = differences(package)
    if reason:
        responses.cancel()  # its blobs would not be used
        warnings.warn(f"executable {package.executable_id} runs on the daemon, not here: {reason}", RuntimeWarning,
                      stacklevel=3)
        return LocalExecutable(remote, package, report, reason)
    received = _received(responses, report)
    named = [("the program", package.program), *((f"weight {s.name!r}", d)
                                                  for s, d in zip(package.weights, package.weight_blobs, strict=True))]
    blobs = []
    for name, digest in named:
        data = received.get(key(digest))
        if data is None:
            data = memo.get(digest)
            if data is None:
                raise BlobMismatch(f"the daemon sent no bytes of {name} ({digest.hash}), and no earlier download did")
            report.remembered_blobs += 1
            report.remembered_bytes += len(data)
        verified(name, digest, data)
        blobs.append(data)
    for digest, data in zip(package.weight_blobs, blobs[1:]):
        memo.put(digest, data)
    return LocalExecutable(remote, package, report, "", *_loaded(package, blobs[0], blobs[1:]))


def _received(responses, report: DownloadReport) -> dict[tuple[str, int], bytearray]:
    """The blobs of the chunks after the package, by digest."""
    blobs: dict[tuple[str, int], bytearray] = {}
    for response in responses:
        chunk = response.chunk
        data = blobs.get(key(chunk.digest))
        if data is None:
            data = blobs[key(chunk.digest)] = bytearray()
            report.received_blobs.append(chunk.digest)
        if chunk.offset != len(data):
            raise BlobMismatch(f"blob {chunk.digest.hash}: a chunk at offset {chunk.offset}, expected {len(data)}")
        data += chunk.data
        report.received_bytes += len(chunk.data)
    return blobs


def _loaded(package: xlacs_pb2.ExecutablePackage, program, weights: list) -> tuple:
    """(program, place, weights) on this process's first device of the package's platform: the program as PJRT
    loads a serialized executable (with the compile options jax.jit uses), `place(arrays)` the inputs (in
    signature order, checked) put on the device, the weights on the device."""
    import jax
    from jax._src import compiler as jax_compiler
    from jax._src import core
    from jax._src.lax import linalg as lax_linalg
    from jax._src.lib import xla_client
    device = jax.devices(package.platform)[0]
    if device.platform == "cpu":
        lax_linalg.initialize_lapack()  # a program that calls LAPACK finds its kernels through pointers jax binds
    options = jax_compiler.get_compile_options(1, 1, [[device.id]], backend=device.client)
    loaded = device.client.deserialize_executable(bytes(program), xla_client.DeviceList((device,)), options)
    arrays = [np.frombuffer(data, dtypes.to_numpy(s.dtype)).reshape(tuple(s.shape))
              for s, data in zip(package.weights, weights)]
    # jax.device_put's own dispatch costs 10x the copy of a small input (30-40 us against 4 us per array here): the
    # inputs' types are known, so each goes through the call device_put ends in.
    sharding = jax.sharding.SingleDeviceSharding(device)
    avals = [core.ShapedArray(tuple(s.shape), dtypes.to_numpy(s.dtype)) for s in package.signature.inputs]

    def place(inputs: list[np.ndarray]) -> list:
        return [xla_client.batched_device_put(aval, sharding, [a], [device], True) for aval, a in zip(avals, inputs)]
    return loaded, place, jax.device_put(arrays, device)
