"""Gates for the costly RPCs: a few slots for their costly part, a bounded queue before them, and the call's
deadline and cancellation, which stop it while it waits and between the stages of its work."""
from __future__ import annotations

import collections
import contextlib
import threading
import time
from concurrent import futures
from typing import Callable, TypeVar

from xlacs_server import metrics
from xlacs_server.config import Settings
from xlacs_server.errors import Cancelled, DeadlineExceeded, LimitExceeded

T = TypeVar("T")
NO_DEADLINE_S = 1e9  # grpc reports a call without a deadline as ~9e18 s remaining
SLOT_POLL_S = 0.05  # how often a call waiting for a slot looks at its deadline and its client


class Call:
    """One RPC as its work sees it: it stops when the client cancels or goes away, or at the earlier of the
    client's deadline and the server's own limit for the work."""

    def __init__(self, context, gate: "Gate", limit_s: float | None, limit_setting: str):
        now = time.monotonic()
        self.gate = gate
        self.context = context
        self.ended = False  # the RPC ended before its work was handed to a gate thread
        client_s = context.time_remaining()
        client_s = client_s if client_s is not None and client_s < NO_DEADLINE_S else None
        server_wins = limit_s is not None and (client_s is None or limit_s < client_s)
        self.deadline = now + limit_s if server_wins else None if client_s is None else now + client_s
        self.why = f"the server's limit {limit_setting}={limit_s} s" if server_wins else "the client's deadline"

    def remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def checkpoint(self, stage: str) -> None:
        # The deadline first: grpc also ends the RPC when the client's deadline passes.
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise DeadlineExceeded(f"the call ran past {self.why}; stopped before {stage}")
        if self.ended or not self.context.is_active():
            raise Cancelled(f"the client cancelled the call or went away; stopped before {stage}")

    def slot(self):
        """Holds one of the gate's slots for the costly part of the work (`Gate.hold`)."""
        return self.gate.hold(self)


class Slots:
    """`count` slots handed out first come, first served: a release gives its slot to the call that has waited
    longest, and a call that finds one free takes it only when no call waits. (A semaphore waited on with a
    timeout, to look at the call's deadline between waits, sends a waiter to the back at each timeout: ResNet50's
    p99 under 16 clients was 2.5 s with it, 0.73 s in line; docs/performance.md, Throughput under load.)"""

    def __init__(self, count: int):
        self._free = count
        self._waiting: collections.deque[threading.Event] = collections.deque()
        self._lock = threading.Lock()

    def acquire(self, checkpoint: Callable[[], None]) -> None:
        """Takes a slot, waiting in line for it if none is free; `checkpoint()` every SLOT_POLL_S while it waits
        may raise, and then the call leaves the line (passing on a slot given to it meanwhile)."""
        with self._lock:
            if self._free:
                self._free -= 1
                return
            given = threading.Event()
            self._waiting.append(given)
        while not given.wait(SLOT_POLL_S):
            try:
                checkpoint()
            except BaseException:
                with self._lock:
                    if not given.is_set():
                        self._waiting.remove(given)
                        raise
                self.release()
                raise

    def release(self) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._free += 1


class Gate:
    """At most `slots` calls do their costly part at once (`hold`), and at most `queue` more are
    admitted; the next call fails fast with RESOURCE_EXHAUSTED instead of piling up. Admitted calls run at
    once on the gate's own threads, so what costs no slot (a Compile that hits a cache) never waits behind
    the costly work of others. A call whose client cancels or whose deadline passes returns at once: if it
    waits for a slot it leaves the queue, and if it holds one, its work keeps it until its next checkpoint,
    so the slots never overcommit the machine.

    With `own_threads=False` the work runs on the RPC's own thread instead, for work that always ends soon
    after the call must stop (an Execute: a program with loops runs in a worker killed at its deadline): the
    hand-off to a gate thread and back costs more than a small program's run (docs/data_plane.md). A call
    waiting for a slot still leaves the queue at its deadline or when its client cancels, within SLOT_POLL_S."""

    def __init__(self, rpc: str, slots: int, queue: int, *, slots_setting: str, queue_setting: str,
                 limit_s: float | None = None, limit_setting: str = "", own_threads: bool = True):
        self.rpc = rpc
        self.slots, self.queue = slots, queue
        self.slots_setting, self.queue_setting = slots_setting, queue_setting
        self.limit_s, self.limit_setting = limit_s, limit_setting
        self._slots = Slots(slots)
        self._holders: dict[int, float] = {}  # calls holding a slot -> since when (monotonic)
        self._executor = futures.ThreadPoolExecutor(slots + queue, thread_name_prefix=rpc.lower()) \
            if own_threads else None
        self._admitted = 0  # running or waiting
        self._lock = threading.Lock()
        self._in_flight = metrics.CALLS_IN_FLIGHT.labels(rpc)
        self._queue_seconds = metrics.QUEUE_SECONDS.labels(rpc)

    @contextlib.contextmanager
    def hold(self, call: Call):
        """Holds one slot for `call`'s costly part (an XLA compile, an execution); waits for one first, leaving the
        queue when the call must stop (`call.checkpoint`). The wait is xlacs_queue_seconds."""
        start = time.perf_counter()
        self._slots.acquire(lambda: call.checkpoint(f"a {self.rpc} slot was free"))
        self._queue_seconds.observe(time.perf_counter() - start)
        key = id(call)
        self._holders[key] = time.monotonic()  # a dict's item set and del are atomic: no lock
        try:
            yield
        finally:
            del self._holders[key]
            self._slots.release()

    def run(self, context, work: Callable[[Call], T]) -> T:
        """`work(call)`, admitted: it takes `call.slot()` for its costly part, calls `call.checkpoint(stage)`
        between its stages, and may bound what it cannot interrupt by `call.remaining()`."""
        call = Call(context, self, self.limit_s, self.limit_setting)
        with self._lock:
            if self._admitted >= self.slots + self.queue:
                raise LimitExceeded(f"{self.rpc} is busy ({self.slots_setting}={self.slots} calls run and "
                                    f"{self.queue} wait)", self.queue_setting, self.queue)
            self._admitted += 1
            self._in_flight.inc()
        if self._executor is None:
            try:
                return self._start(call, work)
            finally:
                self._release(None)
        wake = threading.Event()  # set when the RPC ends (cancelled, timed out) or the work is done
        call.ended = not context.add_callback(wake.set)
        future = self._executor.submit(self._start, call, work)
        future.add_done_callback(self._release)
        future.add_done_callback(lambda _: wake.set())
        wake.wait(call.remaining())
        if not future.done():
            future.cancel()  # still waiting: it leaves the queue and never runs
            call.checkpoint("its result")
        return future.result(call.remaining())

    @staticmethod
    def _start(call: Call, work: Callable[[Call], T]) -> T:
        call.checkpoint("it started")
        return work(call)

    def held_past(self, seconds: float) -> int:
        """How many slots are held by calls that have held them longer than `seconds`."""
        now = time.monotonic()
        return sum(now - since > seconds for since in list(self._holders.values()))

    def _release(self, _) -> None:
        with self._lock:
            self._admitted -= 1
            self._in_flight.dec()


class Admission:
    """At most `limit` calls inside at once (`with admission:`); the next fails fast with LimitExceeded. For calls that
    wait elsewhere than in a gate (an infer in a dynamic batcher's queue); `setting`/`raise_with` as LimitExceeded's."""

    def __init__(self, what: str, limit: int, setting: str, raise_with: str = ""):
        self.what, self.limit, self.setting, self.raise_with = what, limit, setting, raise_with
        self.inside = 0
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        with self._lock:
            if self.inside >= self.limit:
                raise LimitExceeded(f"{self.inside} {self.what} wait or run", self.setting, self.limit,
                                    self.raise_with)
            self.inside += 1

    def __exit__(self, *_) -> None:
        with self._lock:
            self.inside -= 1


class Gates:
    """The gates of one server: Compile and CheckGraph share one (both parse graphs), Execute has its own; infers
    in dynamic batchers are admitted apart (they take an execute slot per batch, not per request)."""

    def __init__(self, settings: Settings):
        gated = (settings.max_concurrent_compiles + settings.compile_queue + settings.max_concurrent_executes
                 + settings.execute_queue)
        if gated >= settings.workers:
            raise ValueError(f"workers={settings.workers} must exceed the calls the gates admit ({gated}: "
                             "max_concurrent_compiles + compile_queue + max_concurrent_executes + execute_queue), "
                             "so that a health check always finds a thread")
        self.compile = Gate("Compile", settings.max_concurrent_compiles, settings.compile_queue,
                            slots_setting="max_concurrent_compiles", queue_setting="compile_queue",
                            limit_s=settings.compile_deadline_s, limit_setting="compile_deadline_s")
        self.execute = Gate("Execute", settings.max_concurrent_executes, settings.execute_queue,
                            slots_setting="max_concurrent_executes", queue_setting="execute_queue",
                            own_threads=False)
        # An infer in a dynamic batcher's queue holds its transport's thread: they get the threads the gated calls
        # leave, but the one a health check needs.
        self.batched = Admission(
            "infers in dynamic batchers", settings.workers - gated - 1, "batched_infers",
            f"XLACS_WORKERS: workers={settings.workers} less the {gated} gated calls and one for health checks")
        # A slot held past these is stuck: a compile or an execution runs past its limit, which the daemon
        # could not stop (an XLA compile, a program run in the daemon).
        self._limits = ((self.compile, "compile_deadline_s", settings.compile_deadline_s),
                        (self.execute, "execute_deadline_s", settings.execute_deadline_s))

    def stuck(self) -> str:
        """Why the daemon cannot take calls of some RPC (every slot of its gate stuck), or ""."""
        for gate, setting, limit_s in self._limits:
            if gate.held_past(limit_s) >= gate.slots:
                return f"all {gate.slots} {gate.rpc} slots are held by calls running past {setting}={limit_s:g} s"
        return ""
