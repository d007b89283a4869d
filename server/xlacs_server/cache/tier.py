"""What a cache tier is: executables by cache key, with the counters every tier reports. The walk over the
tiers (tiers.py) asks nothing else of one, so a new tier is one class and one line in tiers.OPENERS."""
from __future__ import annotations

import abc
import contextlib
from typing import Callable, Iterator

from xlacs_server.cache.stats import TierStats
from xlacs_server.execute.devices import DeviceRef
from xlacs_server.execute.executable import Executable


class Tier(abc.ABC):
    """One level of the compilation cache. `tier` is its name in GetStats, /metrics, the dashboard and a
    Compile's `cache`; `stats` its counters. A tier counts its own backend errors, evictions, entries and bytes;
    the walk counts its hits, misses and refused entries."""
    tier: str
    stats: TierStats

    @abc.abstractmethod
    def get(self, key: str, device: DeviceRef) -> Executable | None:
        """The executable stored under `key`, loaded onto `device`; None if there is none or the backend failed.
        Raises cache.entry.RejectedEntry when what is stored fails its checks (the walk counts it a miss)."""

    @abc.abstractmethod
    def put(self, executable: Executable, serialized: bytes) -> None:
        """Stores the executable under its key; `serialized` is its PJRT form (executable.serialized may be
        None already: an executable that runs in the daemon keeps none)."""

    @contextlib.contextmanager
    def lease(self, key: str, checkpoint: Callable[[str], None]) -> Iterator[bool]:
        """Held while this process compiles `key`, so that processes sharing the tier compile it once. Yields
        True while held, False once another process's lease on the key has gone (its executable may be stored
        now: look again); `checkpoint(stage)` may raise to stop a wait. A tier that processes do not share, or
        that does not coordinate them, is always held."""
        yield True

    def close(self) -> None:
        """At shutdown: releases what the tier holds for others (its leases)."""
