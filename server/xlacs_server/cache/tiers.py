"""The compilation cache: its tiers, fastest first, and the walk over them (docs/cache.md).

A Compile looks in the first tier, L1 (executables loaded in this process), before it waits for anything.
On a miss, holding the key's in-process lock, it looks in each slower tier, under the leases of the tiers
that have one; what a slower tier had is put into the faster ones, and what was compiled into all of them.
Each tier's own file says how it opens from the settings: adding a tier is that file and one line here."""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Callable, Iterator, NamedTuple

from xlacs_server.cache import disk, memory, redis_store
from xlacs_server.cache.entry import RejectedEntry
from xlacs_server.cache.tier import Tier
from xlacs_server.config import Settings
from xlacs_server.execute.devices import DeviceRef
from xlacs_server.execute.executable import Executable

log = logging.getLogger(__name__)

# Fastest first; an opener returns None when the settings do not configure its tier. L1 is always first.
OPENERS: list[Callable[[Settings], Tier | None]] = [
    memory.open_tier,       # l1: loaded executables in this process
    redis_store.open_tier,  # l2: a Redis that every replica shares
    disk.open_tier,         # disk: a local directory, without Redis
]


class Hit(NamedTuple):
    executable: Executable
    tier: str  # the name of the tier that had it


class Miss:
    """No tier has the key, and this process holds its leases while it compiles."""

    def __init__(self, leases: contextlib.ExitStack):
        self._leases = leases

    def keep(self) -> contextlib.ExitStack:
        """The leases, held past the lookup's block until the returned stack is closed: a tiered compile puts
        its executable in the tiers after the block (compile/tier_up.py)."""
        return self._leases.pop_all()


def open_tiers(settings: Settings) -> Tiers:
    """The tiers the settings configure, in the order of OPENERS."""
    return Tiers([tier for tier in (open_tier(settings) for open_tier in OPENERS) if tier is not None])


class Tiers(Sequence[Tier]):
    """The tiers, fastest first; `l1`, the first, holds the executables loaded in this process (the dashboard
    lists them). Each tier counts one hit or one miss per Compile that looks in it."""

    def __init__(self, tiers: list[Tier]):
        self._tiers = list(tiers)
        self.l1: memory.MemoryCache = self._tiers[0]

    def __getitem__(self, index):
        return self._tiers[index]

    def __len__(self) -> int:
        return len(self._tiers)

    def get(self, key: str, device: DeviceRef) -> Hit | None:
        """L1's executable, counted as its hit or miss: the look every Compile makes first, waiting for nothing."""
        executable = self.l1.get(key, device)
        if executable is None:
            self.l1.stats.add(misses=1)
            return None
        _count_hit(self.l1, executable)
        return Hit(executable, self.l1.tier)

    @contextlib.contextmanager
    def lookup(self, key: str, device: DeviceRef, checkpoint: Callable[[str], None]) -> Iterator[Hit | Miss]:
        """After get() missed, with the key's in-process lock held: yields the executable of the fastest tier that
        has it, or a Miss: then this process holds the key's lease in every tier until the block ends (or, after
        Miss.keep(), until what that returns is closed), and should compile and put() it. Processes that find a
        lease taken wait for it to go, then load what its holder
        stored; if it stored nothing, one of them takes the lease. `checkpoint(stage)` raises to stop a wait
        (the client cancelled, or its deadline passed).

        L1 is looked in again, uncounted (get() counted it): a request of this process may have filled it while
        this one waited for the lock. Each slower tier counts once: a hit for the tier that had it, a miss for
        each tier looked in before it (for every tier when nothing had it)."""
        executable = self.l1.get(key, device)
        if executable is not None:
            yield Hit(executable, self.l1.tier)
            return
        behind = self._tiers[1:]
        found = _look(behind, key, device, count_refusals=True)
        while found is None:
            with self._leases(key, checkpoint) as (held, leases):
                # Look again: a peer may have stored it since. Right after taking the leases, a refused entry is
                # the one refused above, so it is not counted twice.
                found = _look(behind, key, device, count_refusals=not held)
                if found is None and held:
                    for tier in behind:
                        tier.stats.add(misses=1)
                    yield Miss(leases)
                    return
        index, executable = found
        for tier in behind[:index]:
            tier.stats.add(misses=1)
        _count_hit(behind[index], executable)
        yield Hit(executable, behind[index].tier)

    def put(self, executable: Executable, serialized: bytes, hit: Hit | None = None) -> None:
        """Writes the executable through every tier faster than the one that had it (`hit`), or through every
        tier when it was compiled (no hit); slowest first, L1 last."""
        faster = len(self._tiers) if hit is None else [t.tier for t in self._tiers].index(hit.tier)
        for tier in reversed(self._tiers[:faster]):
            tier.put(executable, serialized)

    def close(self) -> None:
        """At shutdown: each tier releases what it holds for others (the leases of compiles in flight)."""
        for tier in self._tiers:
            tier.close()

    @contextlib.contextmanager
    def _leases(self, key: str, checkpoint: Callable[[str], None]) -> Iterator[tuple[bool, contextlib.ExitStack]]:
        """The key's lease in each tier, fastest first, and the stack that releases them; held if every one is. A
        tier that waited for another process's lease ends the round: what it waited for may be stored now."""
        with contextlib.ExitStack() as leases:
            yield all(leases.enter_context(tier.lease(key, checkpoint)) for tier in self._tiers), leases


def _look(tiers: list[Tier], key: str, device: DeviceRef, count_refusals: bool) -> tuple[int, Executable] | None:
    """(index, executable) of the first of `tiers` that has the key. A refused entry is a miss, counted in the
    tier's `rejected` and logged if `count_refusals`; the executable found or compiled instead overwrites it."""
    for index, tier in enumerate(tiers):
        try:
            executable = tier.get(key, device)
        except RejectedEntry as e:
            if count_refusals:
                tier.stats.add(rejected=1)
                log.warning("%s: refused the entry of %s (%s); it is a miss, and what is found or compiled instead "
                            "replaces it", tier.tier, key, e)
            continue
        if executable is not None:
            return index, executable
    return None


def _count_hit(tier: Tier, executable: Executable) -> None:
    # A tiered compile's optimizing compile ("optimize", compile/tier_up.py) is saved too.
    tier.stats.add(hits=1, compile_ms_saved=sum(executable.stage_ms.get(stage, 0.0)
                                                for stage in ("lower", "compile", "optimize")))
