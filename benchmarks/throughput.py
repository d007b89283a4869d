"""Throughput: N clients, each with its own channel, call Execute back to back on a small model for a fixed
time; requests per second and the latency percentiles of all their calls."""
from __future__ import annotations

import threading
import time

import numpy as np

from benchmarks.models import Model
from benchmarks.timing import Samples, timed
from xlacs import Client


def _clients(address: str, model: Model, concurrency: int, seconds: float) -> dict:
    clients = [Client(address, timeout=600) for _ in range(concurrency)]
    try:
        executables = [model.compile(c) for c in clients]
        for executable in executables:  # every channel connected and warm before the clock starts
            executable(*model.inputs)
        start = threading.Barrier(concurrency + 1)
        stop = threading.Event()
        per_client: list[list[float]] = [[] for _ in range(concurrency)]

        def run(executable, ms: list[float]) -> None:
            start.wait()
            while not stop.is_set():
                ms.append(timed(lambda: executable(*model.inputs)))

        threads = [threading.Thread(target=run, args=(e, ms)) for e, ms in zip(executables, per_client)]
        for thread in threads:
            thread.start()
        start.wait()
        began = time.perf_counter()
        time.sleep(seconds)
        stop.set()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - began  # the calls in flight at `stop` finish and count
    finally:
        for c in clients:
            c.close()
    samples = Samples([ms for client_ms in per_client for ms in client_ms])
    return {**samples.summary(), "requests_per_s": len(samples.ms) / elapsed,
            "slowest_client_requests": int(np.min([len(ms) for ms in per_client]))}


def measure(address: str, model: Model, concurrencies: list[int], seconds: float) -> dict:
    return {str(n): _clients(address, model, n, seconds) for n in concurrencies}
