"""Execute's tensors on the wire (docs/data_plane.md): the inputs of a request decoded into arrays, and the outputs
encoded into responses. Execute carries each tensor whole in one xlacs.v1.Tensor; ExecuteStream carries tensors as
consecutive pieces (Tensor.offset), each input written into one array as its pieces come and each output sent from
a view of it, so that no side holds a tensor's bytes twice. Each way a tensor travels has its function here."""
from __future__ import annotations

import itertools
from typing import Callable, Iterator

import grpc
import jax
import numpy as np
from xlacs import dtypes, tensors, wire
from xlacs.v1 import xlacs_pb2

from xlacs_server.errors import Cancelled, InvalidRequest, LimitExceeded
from xlacs_server.execute.executable import Executable
from xlacs_server.execute.resident import ResidentTensor, ResidentTensors, ttl
from xlacs_server.execute.shared_memory import Lease, Target

OUTPUTS = xlacs_pb2.ExecuteResponse.OUTPUTS_FIELD_NUMBER


# --- Execute: each tensor whole ------------------------------------------------------------------------------

def input_array(tensor: xlacs_pb2.Tensor, content: memoryview | None = None) -> np.ndarray:
    """An input sent as its bytes: a read-only array on them, or, given its `content` apart (read in place), an
    aligned copy of it."""
    try:
        return tensors.from_proto(tensor) if content is None else tensors.from_view(tensor, content)
    except ValueError as e:  # UnsupportedDType too
        raise InvalidRequest(str(e)) from None


def inputs(request: xlacs_pb2.ExecuteRequest, contents: list[memoryview] | None, resident: ResidentTensors,
           lease: Lease) -> dict[str, np.ndarray | jax.Array]:
    """The inputs of an Execute by name; `contents` their bytes when the request was read in place
    (rpc/execute_wire.py), in the order of request.inputs."""
    arrays = {}
    for i, t in enumerate(request.inputs):
        if t.name in arrays:
            raise InvalidRequest(f"input {t.name!r} is given more than once")
        content = contents[i] if contents is not None else None
        arrays[t.name] = (resident_input(t, resident, content) if t.handle else
                          lease.input(t) if t.HasField("shared_memory") else input_array(t, content))
    return arrays


def response(executable: Executable, outputs: list, execute_ms: float, targets: dict[str, Target]) -> bytes:
    """The serialized ExecuteResponse (rpc/execute_wire.py): the outputs, each whole, in fetch order, an array's
    bytes copied once into it (xlacs.wire); those of `targets` written into shared memory."""
    unknown = sorted(set(targets) - {s.name for s in executable.outputs}) if targets else ()
    if unknown:
        raise InvalidRequest(f"output {unknown[0]!r} is not an output of the executable; its outputs are "
                             f"{[s.name for s in executable.outputs]}")
    pieces = [(shared_output(targets[s.name], a), None) if s.name in targets else output_piece(s.name, a)
              for s, a in zip(executable.outputs, outputs)]
    return wire.encode(xlacs_pb2.ExecuteResponse(execute_ms=execute_ms), OUTPUTS, pieces)


def state_variables(request: xlacs_pb2.CreateStateRequest, max_bytes: int) -> dict[str, np.ndarray]:
    """A CreateState's initial values by variable name, each sent as its bytes, together within max_input_bytes."""
    variables = {}
    for t in request.variables:
        if t.name in variables:
            raise InvalidRequest(f"variable {t.name!r} is given more than once", variable=t.name)
        if t.handle or t.HasField("shared_memory"):
            raise InvalidRequest(f"variable {t.name!r}: a state's initial values are sent as their bytes (content)",
                                 variable=t.name)
        variables[t.name] = input_array(t)
    size = sum(a.nbytes for a in variables.values())
    if size > max_bytes:
        raise LimitExceeded(f"the variables have {size} bytes", "max_input_bytes", max_bytes)
    return variables


# --- Shared memory: bytes in a client's region (execute/shared_memory.py) ---------------------------------------

def output_targets(request: xlacs_pb2.ExecuteRequest, lease: Lease) -> dict[str, Target]:
    """The outputs an Execute writes into shared-memory regions (OutputRequest.shared_memory), by name."""
    targets = {}
    for o in request.outputs:
        if o.HasField("shared_memory"):
            if o.name in targets or o.keep:
                raise InvalidRequest(f"output {o.name!r} goes to shared memory once, and is then not kept")
            targets[o.name] = lease.output(o.name, o.shared_memory)
    return targets


def shared_output(target: Target, output: np.ndarray) -> xlacs_pb2.Tensor:
    """An output written into its region; the Tensor that says its name, dtype, shape and where it is."""
    output = np.asarray(output)
    target.write(output)
    return xlacs_pb2.Tensor(name=target.name, dtype=dtypes.from_numpy(output.dtype), shape=output.shape,
                            shared_memory=target.ref)


# --- Resident tensors: handles instead of bytes (execute/resident.py) ---------------------------------------------

def resident_input(tensor: xlacs_pb2.Tensor, resident: ResidentTensors,
                   content: memoryview | None = None) -> jax.Array:
    """An input by handle: the resident tensor's array, on its device; NOT_FOUND naming the input and the handle
    when it is gone. `content`: its bytes if they came apart from it (there must be none)."""
    if tensor.content or content or tensor.HasField("shared_memory"):
        raise InvalidRequest(f"input {tensor.name!r} has a handle and bytes too: a tensor's bytes are in content, "
                             "a shared-memory region or a resident tensor (handle), exactly one")
    return resident.get(tensor.handle, f"input {tensor.name!r}").array


def kept(request: xlacs_pb2.ExecuteRequest) -> dict[str, float]:
    """The outputs an Execute keeps on the device (OutputRequest.keep): name -> time to live (0: the default)."""
    keep = {}
    for o in request.outputs:
        if o.keep:
            if o.name in keep:
                raise InvalidRequest(f"output {o.name!r} is kept twice: one OutputRequest per output")
            keep[o.name] = ttl(o.ttl_s, o.name)
        elif o.ttl_s:
            raise InvalidRequest(f"output {o.name!r} has ttl_s but not keep: only a kept output has a time to live")
    return keep


def output_piece(name: str, output: np.ndarray | ResidentTensor) -> tuple[xlacs_pb2.Tensor, np.ndarray | None]:
    """An output as xlacs.wire.encode takes it: a resident tensor as its handle, dtype and shape (no bytes); an
    array as its dtype, shape and bytes."""
    if isinstance(output, ResidentTensor):
        return xlacs_pb2.Tensor(name=name, handle=output.handle, dtype=dtypes.from_numpy(output.dtype),
                                shape=output.shape), None
    return tensors.head(name, output)


# --- ExecuteStream: tensors in pieces --------------------------------------------------------------------------

def streamed_inputs(requests: Iterator[tuple[xlacs_pb2.ExecuteRequest, list]], service,
                    checkpoint: Callable[[str], None]) -> tuple[xlacs_pb2.ExecuteRequest, dict[str, np.ndarray]]:
    """The first request of an ExecuteStream (its executable_id, outputs and session) and the inputs put together
    from the pieces of all of them (each request as rpc/execute_wire.py reads it: the message, then its pieces and views
    of their content), each input in one array allocated at its first piece once the inputs' declared bytes are
    checked against max_input_bytes. A piece out of place is INVALID_ARGUMENT naming its input."""
    requests = _received(requests)
    first, first_pieces = next(requests, (None, []))
    if first is None or not first.executable_id:
        raise InvalidRequest("the first request of an ExecuteStream names the executable (executable_id)")
    loaded = service.dynamic.get(first.executable_id) or service.loaded(first.executable_id)  # buckets/ or not
    names = {s.name for s in loaded.inputs}
    declared = []

    def start(name, dtype, shape, nbytes):
        if name not in names:
            raise InvalidRequest(f"input {name!r} is not an input of executable {loaded.id}; it takes {sorted(names)}")
        if name in declared:
            raise InvalidRequest(f"input {name!r} is given more than once: its pieces come one after another")
        declared.append(name)
        service.check_input_bytes(nbytes + sum(a.nbytes for _, a in assembly.tensors))
    assembly = tensors.Assembly("input", start)
    by_handle = {}
    for request, pieces in itertools.chain([(first, first_pieces)], requests):
        checkpoint("the next piece")
        if request.executable_id not in ("", first.executable_id):
            raise InvalidRequest(f"a request of the stream names executable {request.executable_id!r}, the first one "
                                 f"{first.executable_id!r}")
        try:
            for piece, content in pieces:
                if piece.handle:  # a resident tensor: one piece, no bytes
                    start(piece.name, None, None, 0)
                    by_handle[piece.name] = resident_input(piece, service.resident, content)
                else:
                    assembly.add(piece, content)
        except ValueError as e:
            raise InvalidRequest(str(e)) from None
    try:
        return first, {**dict(assembly.finish()), **by_handle}
    except ValueError as e:
        raise InvalidRequest(str(e)) from None


def streamed_outputs(executable: Executable, outputs: list[np.ndarray], execute_ms: float) -> Iterator[bytes]:
    """The outputs of an ExecuteStream in fetch order, a piece per response (serialized: rpc/execute_wire.py),
    execute_ms on the first."""
    first = True
    for s, array in zip(executable.outputs, outputs):
        if isinstance(array, ResidentTensor):  # one piece: its handle, dtype and shape
            yield wire.encode(xlacs_pb2.ExecuteResponse(execute_ms=execute_ms if first else 0.0), OUTPUTS,
                              [output_piece(s.name, array)])
            first = False
            continue
        array = tensors.little_endian(array)
        for offset, content in tensors.pieces(array):
            piece = xlacs_pb2.Tensor()
            tensors.fill_piece(piece, s.name, array, offset, None)
            yield wire.encode(xlacs_pb2.ExecuteResponse(execute_ms=execute_ms if first else 0.0), OUTPUTS,
                              [(piece, content)])
            first = False


def _received(requests: Iterator) -> Iterator:
    """The requests as they arrive; a client that cancels or goes away midway ends the call as CANCELLED."""
    try:
        yield from requests
    except grpc.RpcError:
        raise Cancelled("the client cancelled the stream or went away before its last request") from None
