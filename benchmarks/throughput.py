"""Throughput: N clients, each with its own channel, call Execute back to back on a small model for a fixed
time; requests per second and the latency percentiles of all their calls."""
from __future__ import annotations

import contextlib
import functools
from typing import Iterator

from benchmarks.models import Model
from benchmarks.timing import under_load
from xlacs import Client, Executable


@contextlib.contextmanager
def executables(address: str, model: Model, count: int) -> Iterator[list[Executable]]:
    """`model` on `count` clients of the daemon at `address`, each on its own channel, called once each so that
    every channel is connected and warm before any clock starts; the clients close at the end."""
    clients = [Client(address, timeout=600) for _ in range(count)]
    try:
        compiled = [model.compile(c) for c in clients]
        for executable in compiled:
            executable(*model.inputs)
        yield compiled
    finally:
        for c in clients:
            c.close()


def _clients(address: str, model: Model, concurrency: int, seconds: float) -> dict:
    with executables(address, model, concurrency) as compiled:
        return under_load([functools.partial(e, *model.inputs) for e in compiled], seconds)


def measure(address: str, model: Model, concurrencies: list[int], seconds: float) -> dict:
    return {str(n): _clients(address, model, n, seconds) for n in concurrencies}
