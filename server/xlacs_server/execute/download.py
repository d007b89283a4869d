"""DownloadExecutable (compile remote, run local; docs/data_plane.md): a bound executable as a package, the
serialized per-call PJRT program, its signature, the runtime that compiled it and the weights the program takes
after the inputs (bound and prepared), then the chunks of the blobs the client lacks.

Programs with loops download too, though the daemon runs them in execution workers (execute/isolation.py):
the workers keep a run that never ends from holding the daemon's slots, and in the client's process such a run
holds only the client, as the same program run with jax.jit would.
"""
from __future__ import annotations

from collections.abc import Iterator

import jaxlib
import numpy as np
from xlacs import dtypes
from xlacs.digests import blob_chunks, digest, key
from xlacs.v1 import xlacs_pb2

from xlacs_server.digest import Digest
from xlacs_server.execute.executable import LoadedExecutable
from xlacs_server.tensor_sig import TensorSig


def weight_sigs(loaded: LoadedExecutable) -> list[TensorSig]:
    """The weights the per-call program takes after the inputs, in order (LoadedExecutable.weights): the lifted
    weights it reads, then the prepared ones."""
    executable = loaded.executable
    if executable.prepare is None:
        return executable.params
    return [executable.params[i] for i in executable.prepare.call_params] + executable.prepare.outputs


def download(loaded: LoadedExecutable, signature: xlacs_pb2.Signature,
             have: set[Digest]) -> Iterator[xlacs_pb2.ExecutableDownload]:
    """The package of `loaded`, then the chunks of its program and weights that are not in `have`, each blob
    once. The weights are views of the bound device buffers (on a CPU device no copy); the program is
    serialized now unless a worker's copy is kept."""
    executable = loaded.executable
    program = executable.serialized or executable.compiled.serialize()
    weights = [dtypes.byte_view(np.asarray(w)) for w in loaded.weights]
    blobs = [(digest(program), memoryview(program)), *((digest(w), memoryview(w)) for w in weights)]
    device = executable.device.device
    yield xlacs_pb2.ExecutableDownload(package=xlacs_pb2.ExecutablePackage(
        executable_id=loaded.id, signature=signature, platform=device.platform,
        platform_version=device.client.platform_version, jaxlib_version=jaxlib.__version__, program=blobs[0][0],
        weights=[xlacs_pb2.TensorSpec(name=s.name, dtype=dtypes.from_numpy(s.dtype), shape=s.shape)
                 for s in weight_sigs(loaded)],
        weight_blobs=[d for d, _ in blobs[1:]]))
    sent = {(d.hash, d.size) for d in have}
    unsent = []
    for d, data in blobs:
        if key(d) not in sent:
            sent.add(key(d))
            unsent.append((d, data))
    for chunk in blob_chunks(unsent):
        yield xlacs_pb2.ExecutableDownload(chunk=chunk)
