"""Throughput: N clients, each with its own channel, call Execute back to back on a small model for a fixed
time; requests per second and the latency percentiles of all their calls."""
from __future__ import annotations

import functools

from benchmarks.models import Model
from benchmarks.timing import under_load
from xlacs import Client


def clients(address: str, model: Model, concurrency: int, seconds: float) -> dict:
    """`concurrency` clients of the daemon at `address`, each on its own channel and thread, for `seconds`."""
    clients = [Client(address, timeout=600) for _ in range(concurrency)]
    try:
        executables = [model.compile(c) for c in clients]
        for executable in executables:  # every channel connected and warm before the clock starts
            executable(*model.inputs)
        return under_load([functools.partial(e, *model.inputs) for e in executables], seconds)
    finally:
        for c in clients:
            c.close()


def measure(address: str, model: Model, concurrencies: list[int], seconds: float) -> dict:
    return {str(n): clients(address, model, n, seconds) for n in concurrencies}
