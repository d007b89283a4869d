"""Tiered compilation: a cold compile of a large program answers with a program compiled by quick options
(compiler.quick_options), and its optimized program is compiled here, on a thread of its own, then swapped in.

XLA:CPU spends most of a CNN's cold compile optimizing its per-call program; with LLVM's optimizations off and the
elemental emitters it compiles in 0.33-0.52x the time and runs 2-6x slower (docs/performance.md, Tiered
compilation), so the first result comes seconds sooner. The quick program goes into L1 only; the shared tiers get
the optimized program alone, and the compile keeps holding the key's leases until they have it, so replicas that
wait for the key load the optimized program rather than compiling it again.

One optimizing compile runs at a time, beside the next cold compiles and the Executes, and holds no compile slot:
a tier-up cannot be refused, only queued. Executes in flight finish on the program they started with.

The same worker keeps a bind's prepared weights in the shared tiers (TierUp.keep; cache/prepared.py) after the
Compile that ran the prepare program has answered: one queue of background work that the shutdown grace bounds.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import re
import threading
import time
from typing import Callable

from xlacs_server import metrics
from xlacs_server.execute.executable import OPTIMIZED, Executable

log = logging.getLogger(__name__)
POLL_S = 0.05  # how often a call waiting for a tier-up looks at its deadline and its client
# Tiered on XLA:CPU only: the quick options were measured there (a GPU compile's time goes elsewhere: autotuning).
TIERED_PLATFORMS = ("cpu",)


def tiered(stablehlo: str, *, platform: str, min_ops: int, isolated: Callable[[str], bool]) -> bool:
    """Whether a per-call program compiles tiered: on a platform of TIERED_PLATFORMS, with at least `min_ops` ops
    (0: never), and run in the daemon (`isolated` programs are loaded by execution workers from their serialized
    form, which a tier-up would leave stale)."""
    return 0 < min_ops <= op_count(stablehlo) and platform in TIERED_PLATFORMS and not isolated(stablehlo)


def op_count(stablehlo: str) -> int:
    """The ops with results in a StableHLO module's text."""
    return len(re.findall(r"= (?:stablehlo|chlo)\.", stablehlo))


# The kinds of background work, and what the next replica does when one is dropped at shutdown
TIER_UP, PREPARED = "tier-up(s)", "prepared weights store(s)"
_DROPPED = {TIER_UP: "no shared tier gets their optimized programs, which the next replica compiles again",
            PREPARED: "no shared tier gets their prepared weights, whose prepare program the next replica runs again"}


class TierUp:
    """The optimizing compiles of the quick executables and the stores of prepared weights, one at a time, in the
    order their Compiles submitted them."""

    def __init__(self):
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="xlacs-tier-up")
        # (kind, future) by id(executable) for a tier-up, by the future itself for a store
        self._pending: dict[int | concurrent.futures.Future, tuple[str, concurrent.futures.Future]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, executable: Executable, leases: contextlib.ExitStack, store: Callable[[bytes], None],
               start: threading.Event) -> None:
        """Queues the optimizing compile of the quick `executable`, which begins once `start` is set (the Compile
        that made it has answered: its bind and prepare run do not share the CPU with it); `store(serialized)` puts
        the optimized program in the cache tiers, and `leases` (the key's, tiers.Miss.keep) are released after
        it."""
        with self._lock:
            if self._closed:  # shutting down: the quick program serves the calls still in flight
                leases.close()
                return
            future = self._pool.submit(self._tier_up, executable, leases, store, start)
            self._pending[id(executable)] = (TIER_UP, future)
        future.add_done_callback(lambda _: self._forget(id(executable)))

    def keep(self, name: str, store: Callable[[], None], start: threading.Event) -> None:
        """Queues `store()`, which keeps the prepared weights `name` in the shared tiers, to begin once `start` is
        set (the Compile that ran the prepare program has answered); nothing when shutting down (logged)."""
        with self._lock:
            if self._closed:
                log.info("shutting down: prepared weights %s not kept", name)
                return
            future = self._pool.submit(self._keep, name, store, start)
            self._pending[future] = (PREPARED, future)
        future.add_done_callback(self._forget)

    def wait(self, executable: Executable, checkpoint: Callable[[str], None]) -> None:
        """Returns once `executable`'s tier-up has ended: it runs its optimized program, unless the optimizing
        compile failed (logged; it keeps the quick one) or the daemon is shutting down. `checkpoint(stage)` may
        raise to stop the wait."""
        with self._lock:
            _, future = self._pending.get(id(executable), (TIER_UP, None))
        while future is not None and not future.done():
            checkpoint("the optimized program")
            concurrent.futures.wait([future], timeout=POLL_S)

    def close(self, grace_s: float = 0.0) -> None:
        """At shutdown: the tier-ups and stores pending (running or queued) get up to `grace_s` to end and store
        their optimized programs and prepared weights in the shared tiers, so that the next replica loads them
        rather than compiling or preparing; those still pending then are dropped (logged: a replica does their work
        again), a tier-up's leases released with the tiers' close. The running one cannot be interrupted: a tier-up
        ends unstored."""
        with self._lock:
            pending = {future: kind for kind, future in self._pending.values()}
        if pending:
            log.info("shutting down: %s pending get up to %g s to store their optimized programs and prepared "
                     "weights", _counted(pending.values()), grace_s)
        _, late = concurrent.futures.wait(pending, timeout=grace_s)
        with self._lock:
            self._closed = True
        for kind in (TIER_UP, PREPARED):
            dropped = sum(pending[future] == kind for future in late)
            if dropped:
                log.warning("shutting down: %d %s dropped, not done within %g s; %s", dropped, kind, grace_s,
                            _DROPPED[kind])
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _forget(self, pending: int | concurrent.futures.Future) -> None:
        with self._lock:
            self._pending.pop(pending, None)

    def _keep(self, name: str, store: Callable[[], None], start: threading.Event) -> None:
        start.wait()
        if self._closed:  # the tiers are closed
            return
        try:
            store()  # each tier counts and logs its own failures
        except Exception:  # a device's array that cannot be read back: the next replica prepares them again
            log.exception("prepared weights %s not kept", name)

    def _tier_up(self, executable: Executable, leases: contextlib.ExitStack, store: Callable[[bytes], None],
                 start: threading.Event) -> None:
        start.wait()
        stage_ms = {}
        with leases, metrics.compiling(executable.device.name, stage_ms):
            if self._closed:  # the tiers have released the leases at shutdown: another replica may compile it
                return
            began = time.perf_counter()
            try:
                program = executable.optimize()
                serialized = program.serialize()
            except Exception:  # XLA raises its runtime error type; the quick program keeps serving
                log.exception("the optimizing compile of %s failed; it keeps running its quick program, and no "
                              "cache tier but L1 holds it", executable.key)
                executable.optimize = None  # frees the lowered module; the dashboard still shows "quick"
                return
            stage_ms["optimize"] = (time.perf_counter() - began) * 1e3
            prepare = len(executable.prepare.serialized) if executable.prepare else 0
            executable.compiled, executable.optimize = program, None
            executable.stage_ms["optimize"] = stage_ms["optimize"]
            executable.size_bytes, executable.tier = len(serialized) + prepare, OPTIMIZED
            if not self._closed:
                store(serialized)  # each tier counts and logs its own failures
        log.info("tiered up %s on %s: its optimized program compiled in %.0f ms", executable.key,
                 executable.device.name, stage_ms["optimize"])


def _counted(kinds) -> str:
    """'2 tier-up(s) and 1 prepared weights store(s)': the pending work by kind."""
    kinds = list(kinds)
    return " and ".join(f"{kinds.count(kind)} {kind}" for kind in (TIER_UP, PREPARED) if kind in kinds)
