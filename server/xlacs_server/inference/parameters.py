"""The parameters of an inference request that xlacs honours, and what to do instead for those of Triton's extensions
it does not offer: a request asking for something xlacs would not do fails naming the parameter, rather than being
answered as if it had been done. Values are plain Python values (JSON's, or a gRPC InferParameter's)."""
from __future__ import annotations

from xlacs_server.errors import InvalidRequest, Unimplemented

REQUEST = ("binary_data_output", "timeout")  # of the request: the extension's output format, a deadline
INPUT = ("binary_data_size",)
OUTPUT = ("binary_data",)
_SEQUENCE = "xlacs serves stateless models (no sequence batcher): send each request on its own"
_SHARED_MEMORY = ("xlacs's shared memory is its own API (xlacs.Client, docs/data_plane.md); over the protocol, send "
                  "the tensor in the request (binary data)")
OFFERED_INSTEAD = {
    "sequence_id": _SEQUENCE, "sequence_start": _SEQUENCE, "sequence_end": _SEQUENCE,
    "priority": "xlacs queues a model's requests in arrival order (one priority level)",
    "shared_memory_region": _SHARED_MEMORY, "shared_memory_byte_size": _SHARED_MEMORY,
    "shared_memory_offset": _SHARED_MEMORY,
    "classification": "xlacs has no classification extension: request the output tensor and take its top k",
}


def check(parameters: dict, honoured: tuple[str, ...], where: str) -> dict:
    """`parameters` (of `where`: "the request", "input 'x'"), each one honoured; Unimplemented for a parameter of an
    extension xlacs does not offer, InvalidRequest for any other."""
    if not isinstance(parameters, dict):
        raise InvalidRequest(f"{where}: \"parameters\" must be an object of name: value, not "
                             f"{type(parameters).__name__}")
    for name in parameters:
        if name in honoured:
            continue
        if name in OFFERED_INSTEAD:
            raise Unimplemented(f"{where}: parameter {name!r} is not offered: {OFFERED_INSTEAD[name]}")
        raise InvalidRequest(f"{where}: xlacs honours no parameter {name!r} (it honours "
                             f"{', '.join(honoured) or 'none there'}); leave it out")
    return parameters


def flag(parameters: dict, name: str, where: str, default: bool = False) -> bool:
    value = parameters.get(name, default)
    if not isinstance(value, bool):
        raise InvalidRequest(f"{where}: parameter {name!r} is {value!r}; it must be true or false")
    return value


def timeout_s(parameters: dict) -> float | None:
    """The request's "timeout" (microseconds, as tritonclient sends it) in seconds; None without one."""
    value = parameters.get("timeout")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidRequest(f"the request: parameter 'timeout' is {value!r}; it must be a positive number of "
                             "microseconds")
    return value / 1e6
