"""The RPC path itself: the tiny round trip (one Add on 4 floats) beside gRPC's own floor and in-process JAX,
tensor transfer in GB/s for inputs and outputs of growing size, and the client's peak memory while it moves
them."""
from __future__ import annotations

import contextlib
import ctypes
import functools
import pathlib

import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from benchmarks import client_memory as client_memory_child, models
from benchmarks.peers import IN_PROCESS, XLACS
from benchmarks.peers.remote import PeerProcesses
from benchmarks.raw_grpc import RawGrpc
from benchmarks.timing import interleaved, interleaved_turns, local, timed

TINY_XLACS, TINY_HEALTH, TINY_JAX = "xlacs Execute", "gRPC health Check (floor)", "in-process JAX"
RAW = "raw gRPC bytes"
HANDLER_US = (0, 50, 100, 150, 200, 300)  # the raw handler's busy time in handler_floor
# glibc serves allocations beyond 32 MB with a fresh mmap whose pages fault in one by one; with mmap off
# (M_MMAP_MAX = 0) and trimming off, freed memory is reused already mapped.
HEAP_ONLY_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 62)}
_M_TRIM_THRESHOLD, _M_MMAP_MAX, _DEFAULT_MMAP_MAX, _DEFAULT_TRIM = -1, -4, 65536, 128 * 1024


def tiny_round_trip(client, peers: PeerProcesses, seconds: float) -> dict:
    """p50/p99 of Execute on the tiny Add, beside an empty unary RPC on the same channel (what gRPC Python
    costs before xlacs does anything) and the same program called in-process (in the in-process JAX peer's
    process)."""
    tiny = models.tiny_add()
    executable = tiny.compile(client)
    graph, in_process = peers.graph(tiny), peers.processes[IN_PROCESS]
    in_process.ready(graph)
    health = health_pb2_grpc.HealthStub(client.channel)
    request = health_pb2.HealthCheckRequest(service="")
    samples = interleaved_turns({TINY_XLACS: local(lambda: executable(*tiny.inputs)),
                                 TINY_HEALTH: local(lambda: health.Check(request, timeout=10)),
                                 TINY_JAX: functools.partial(in_process.turn, graph)}, seconds)
    return {name: s.summary() for name, s in samples.items()}


def handler_floor(raw: RawGrpc, seconds: float) -> dict:
    """p50/p99 of raw gRPC calls whose handler works HANDLER_US[i] µs, interleaved: how much of the tiny round
    trip's goal (at most 1.3x the empty call) a handler may spend on this machine, whatever it does."""
    samples = interleaved_turns({us: local(functools.partial(raw.work, us)) for us in HANDLER_US}, seconds)
    return {str(us): s.summary() for us, s in samples.items()}


def handler_ratios(floor: dict) -> dict[str, float]:
    """handler_floor's p50s against its empty call's, by busy µs."""
    return {us: s["p50_ms"] / floor["0"]["p50_ms"] for us, s in floor.items()}


def transfer(client, raw: RawGrpc, sizes_mb: list[int], seconds: float) -> dict:
    """GB/s (decimal) of the p50 call, for an input of each size (a 4-byte output), an output of each size
    (a 4-byte input), and both (`x + 1`: GB/s counts the bytes of both ways), beside gRPC Python moving the same
    bytes raw between two processes, interleaved. The client picks Execute or ExecuteStream as it does for
    any call (xlacs.streaming.STREAM_BYTES)."""
    results = {}
    for size in sizes_mb:
        nbytes = size * models.MB
        payload = bytes(nbytes)
        for direction, model, floor in (("input", models.upload(nbytes), lambda: raw.sink(payload)),
                                        ("output", models.download(nbytes), lambda: raw.source(nbytes)),
                                        ("in and out", models.round_trip(nbytes), lambda: raw.echo(payload))):
            executable = model.compile(client)
            moved = nbytes * (2 if direction == "in and out" else 1)
            samples = interleaved({XLACS: lambda: executable(*model.inputs), RAW: floor}, seconds, min_calls=5)
            results[f"{direction} {size} MB"] = {
                peer: {**s.summary(), "gb_per_s": moved / (s.p50 / 1e3) / 1e9} for peer, s in samples.items()}
    return results


def client_memory(client, address: str, nbytes: int, directory: pathlib.Path) -> dict:
    """The most a client's process grows during one Execute that sends `nbytes` and gets as many back, as the
    client sends it (streamed) and sent as a unary Execute, over the payload (`nbytes`)."""
    model = models.round_trip(nbytes)
    model.compile(client)
    peaks = {how: client_memory_child.measure(address, model, directory, unary=how == "unary")
             for how in ("streamed", "unary")}
    return {"payload_bytes": nbytes, **{f"{how}_peak_bytes": peak for how, peak in peaks.items()},
            **{f"{how}_ratio": peak / nbytes for how, peak in peaks.items()}}


def copy_rates(nbytes: int, repeats: int = 5) -> dict:
    """GB/s of one memory copy of `nbytes`, into fresh pages (as every bytes object and message on the RPC
    path is: a large allocation is a new mmap whose pages fault in on first touch) and into pages already
    mapped: the unit cost of each copy the transfer path makes."""
    source = np.random.default_rng(0).integers(0, 255, nbytes, dtype=np.uint8)
    target = np.empty_like(source)
    fresh = min(timed(lambda: source.tobytes()) for _ in range(repeats))
    reused = min(timed(lambda: np.copyto(target, source)) for _ in range(repeats))
    return {"bytes": nbytes, "fresh_pages_gb_per_s": nbytes / fresh / 1e6,
            "mapped_pages_gb_per_s": nbytes / reused / 1e6}


@contextlib.contextmanager
def heap_only():
    """This process's glibc without mmap for large blocks (HEAP_ONLY_ENV set at run time), then back."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(_M_MMAP_MAX, 0)
    libc.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(2 ** 31 - 1))
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
        libc.mallopt(_M_TRIM_THRESHOLD, _DEFAULT_TRIM)
