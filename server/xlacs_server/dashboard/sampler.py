"""Samples a service's counters and cache tiers in the background into a bounded history, for rates and charts."""
from __future__ import annotations

import collections
import dataclasses
import threading
import time

from xlacs_server.cache.stats import TierStats


@dataclasses.dataclass(frozen=True)
class Sample:
    time: float
    requests: int
    errors: int
    compiles: int
    executes: int
    tiers: dict[str, TierStats]  # copies, by tier name, in the service's tier order


class Sampler:
    def __init__(self, service, interval_s: float, keep: int = 900):  # 900 samples: half an hour at 2 s
        self.service = service
        self.interval_s = interval_s
        self._history: collections.deque[Sample] = collections.deque(maxlen=keep)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def now(self) -> Sample:
        """The service's state at this moment (not added to the history)."""
        c = self.service.counters
        return Sample(time.time(), c.requests, c.errors, c.compiles, c.executes,
                      {t.tier: dataclasses.replace(t.stats) for t in self.service.tiers})

    def sample(self) -> None:
        self._history.append(self.now())

    def history(self) -> list[Sample]:
        return list(self._history)

    def start(self) -> None:
        self.sample()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="dashboard-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()


def rate(history: list[Sample], latest: Sample, field: str, window_s: float) -> float | None:
    """Events per second of a counter over the last `window_s`; None without an earlier sample in the window."""
    earlier = [s for s in history if latest.time - window_s <= s.time < latest.time]
    if not earlier:
        return None
    first = earlier[0]
    return (getattr(latest, field) - getattr(first, field)) / (latest.time - first.time)


def hit_rates(history: list[Sample], tier: str) -> list[tuple[float, float | None, int]]:
    """(time, hit rate, lookups) of `tier` in each interval between samples; the rate is None without lookups."""
    points = []
    for before, after in zip(history, history[1:]):
        if tier not in before.tiers or tier not in after.tiers:
            continue
        hits = after.tiers[tier].hits - before.tiers[tier].hits
        lookups = hits + after.tiers[tier].misses - before.tiers[tier].misses
        points.append((after.time, hits / lookups if lookups else None, lookups))
    return points
