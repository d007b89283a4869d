"""Timing on a noisy machine: percentiles of per-call samples, and peers timed interleaved so that noise
falls on all of them alike."""
from __future__ import annotations

import dataclasses
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


def repeat(fn: Callable[[], object], seconds: float, min_calls: int = 5, max_calls: int = 1_000_000) -> Samples:
    """Calls `fn` for about `seconds` (at least `min_calls`, at most `max_calls` times), after one warm-up."""
    fn()
    ms = []
    deadline = time.perf_counter() + seconds
    while len(ms) < max_calls and (len(ms) < min_calls or time.perf_counter() < deadline):
        ms.append(timed(fn))
    return Samples(ms)


def interleaved(fns: dict[str, Callable[[], object]], seconds: float, rounds: int = 5,
                min_calls: int = 5) -> dict[str, Samples]:
    """Each peer gets `seconds` in all, in `rounds` turns taken in rotation after one warm-up call each, so
    that a burst of load from elsewhere on the machine lands on every peer rather than on one."""
    for fn in fns.values():
        fn()
    samples = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            deadline = time.perf_counter() + seconds / rounds
            calls = 0
            while calls < -(-min_calls // rounds) or time.perf_counter() < deadline:
                samples[name].append(timed(fn))
                calls += 1
    return {name: Samples(ms) for name, ms in samples.items()}
