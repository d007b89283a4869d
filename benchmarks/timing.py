"""Timing on a noisy machine: percentiles of per-call samples, and peers timed interleaved so that noise
falls on all of them alike. A peer takes its turns through a `Turn`: in this process (`local`) or in its own
process (benchmarks/peers/remote.py), which times its calls with `calls_for` as well."""
from __future__ import annotations

import dataclasses
import random
import threading
import time
from typing import Callable, TypeVar

import numpy as np

T = TypeVar("T")


@dataclasses.dataclass
class Samples:
    """Per-call wall times in milliseconds."""
    ms: list[float]

    @property
    def p50(self) -> float:
        return float(np.percentile(self.ms, 50))

    @property
    def p99(self) -> float:
        return float(np.percentile(self.ms, 99))

    def summary(self) -> dict:
        return {"p50_ms": self.p50, "p99_ms": self.p99, "n": len(self.ms)}


def timed(fn: Callable[[], T]) -> float:
    """Milliseconds of one call."""
    return timed_result(fn)[0]


def timed_result(fn: Callable[[], T]) -> tuple[float, T]:
    """(milliseconds of one call, what it returned)."""
    start = time.perf_counter()
    result = fn()
    return (time.perf_counter() - start) * 1e3, result


# (seconds, min_calls) -> the milliseconds of each call made: at least min_calls, and until `seconds` have passed.
Turn = Callable[[float, int], list[float]]


def calls_for(fn: Callable[[], object], seconds: float, min_calls: int) -> list[float]:
    """Milliseconds of each call of `fn`, called at least `min_calls` times and until `seconds` have passed."""
    ms = []
    deadline = time.perf_counter() + seconds
    while len(ms) < min_calls or time.perf_counter() < deadline:
        ms.append(timed(fn))
    return ms


def local(fn: Callable[[], object]) -> Turn:
    """The turns of a peer called in this process."""
    return lambda seconds, min_calls: calls_for(fn, seconds, min_calls)


def interleaved_turns(turns: dict[str, Turn], seconds: float, rounds: int = 5,
                      min_calls: int = 5) -> dict[str, Samples]:
    """Each peer gets `seconds` in all, in `rounds` turns taken in rotation after one warm-up call each, so
    that a burst of load from elsewhere on the machine lands on every peer rather than on one. One peer runs
    at a time: a turn returns when its calls are done. Each round takes the peers in another order (shuffled,
    the same for every run): what a peer leaves behind for a while after its turn slows whoever comes next (a
    call of InceptionV3 through xlacs took 53-76 ms right after ONNX Runtime's turn, against 50 ms alone), and
    in a fixed order it would always be the same peer."""
    for turn in turns.values():
        turn(0, 1)
    samples = {name: [] for name in turns}
    order, shuffle = list(turns), random.Random(0).shuffle
    for _ in range(rounds):
        for name in order:
            samples[name] += turns[name](seconds / rounds, -(-min_calls // rounds))
        shuffle(order)
    return {name: Samples(ms) for name, ms in samples.items()}


def interleaved(fns: dict[str, Callable[[], object]], seconds: float, rounds: int = 5,
                min_calls: int = 5) -> dict[str, Samples]:
    """`interleaved_turns` of peers that are all called in this process."""
    return interleaved_turns({name: local(fn) for name, fn in fns.items()}, seconds, rounds, min_calls)


def under_load(calls: list[Callable[[], object]], seconds: float) -> dict:
    """Each of `calls` on a thread of its own, called back to back for `seconds` once all have started (a client
    each, or the same engine shared by many): requests per second over all of them, and the latency percentiles
    of all their calls. The calls in flight when the time is up finish and count."""
    start = threading.Barrier(len(calls) + 1)
    stop = threading.Event()
    per_thread: list[list[float]] = [[] for _ in calls]

    def run(call: Callable[[], object], ms: list[float]) -> None:
        start.wait()
        while not stop.is_set():
            ms.append(timed(call))

    threads = [threading.Thread(target=run, args=(call, ms)) for call, ms in zip(calls, per_thread)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    samples = Samples([ms for thread_ms in per_thread for ms in thread_ms])
    return {**samples.summary(), "requests_per_s": len(samples.ms) / elapsed,
            "slowest_client_requests": int(np.min([len(ms) for ms in per_thread]))}
