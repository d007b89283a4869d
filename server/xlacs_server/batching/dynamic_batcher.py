"""Triton's dynamic batcher for one model version: requests queue, and one scheduler thread merges the oldest of
them along dim 0 (a request may carry several rows) into a batch of at most max_batch_size rows, runs it once and
splits the outputs' rows back to each request. `concurrency` scheduler threads each form and run batches, so that
batches run side by side as the daemon's execute slots allow (as Triton's model instances do): one batch at a time
leaves cores idle while it pads, copies and splits. A batch leaves when it is full (max_batch_size, or the largest
preferred_batch_size), or when its oldest request has waited max_queue_delay; whatever queues while a batch runs
forms the next, so under load batches grow without any delay configured."""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable

import numpy as np

from xlacs_server.errors import Cancelled, DeadlineExceeded, LimitExceeded, Unavailable
from xlacs_server.gates import NO_DEADLINE_S, SLOT_POLL_S

log = logging.getLogger(__name__)

Arrays = dict[str, np.ndarray]
QUEUE_SETTING = "dynamic_batching.default_queue_policy.max_queue_size"


class _Request:
    """One request in the queue: its inputs and rows, then its outputs (or error) and when its batch started."""

    def __init__(self, inputs: Arrays):
        self.inputs = inputs
        self.rows = next(iter(inputs.values())).shape[0]
        self.queued = time.perf_counter()
        self.done = threading.Event()
        self.outputs: Arrays | None = None
        self.error: BaseException | None = None
        self.started = 0.0
        self.times = None  # what the run of its batch says of its time (a RunTimes)


class DynamicBatcher:
    def __init__(self, run: Callable[[Arrays], tuple[Arrays, object]], *, name: str, max_batch_size: int,
                 max_queue_delay_s: float, preferred_batch_sizes: tuple[int, ...] = (), max_queue_size: int = 0,
                 concurrency: int = 1):
        self._run = run
        self.name = name
        self.max_batch_size = max_batch_size
        self.max_queue_delay_s = max_queue_delay_s
        # A batch of the largest preferred size that fits leaves at once, not waiting out the delay.
        fitting = [size for size in preferred_batch_sizes if size <= max_batch_size]
        self._full_rows = max(fitting) if fitting else max_batch_size
        self.max_queue_size = max_queue_size
        self._queue: collections.deque[_Request] = collections.deque()
        self._changed = threading.Condition()
        self._closed = False
        self._threads = [threading.Thread(target=self._schedule, name=f"batcher {name} {i}", daemon=True)
                         for i in range(concurrency)]
        for thread in self._threads:
            thread.start()

    def infer(self, inputs: Arrays, context) -> tuple[Arrays, float, object]:
        """(this request's output rows, queue seconds, what the run of its batch said of its time). `inputs` are
        checked already (same rows in each, at most max_batch_size). The request leaves the queue when `context`'s
        deadline passes or its client goes away."""
        request = _Request(inputs)
        with self._changed:
            if self._closed:
                raise Unavailable(f"{self.name} is unloading: its batcher takes no request")
            if self.max_queue_size and len(self._queue) >= self.max_queue_size:
                raise LimitExceeded(f"{self.name}'s batch queue is full ({len(self._queue)} requests wait)",
                                    QUEUE_SETTING, self.max_queue_size, raise_with="the model's config.pbtxt")
            self._queue.append(request)
            self._changed.notify_all()
        self._wait(request, context)
        if request.error is not None:
            raise request.error
        return request.outputs, request.started - request.queued, request.times

    @property
    def queued(self) -> int:
        """How many requests wait for a batch."""
        with self._changed:
            return len(self._queue)

    def close(self) -> None:
        """Fails what is queued with Unavailable (the model is unloading); the batches running finish."""
        with self._changed:
            self._closed = True
            queued, self._queue = list(self._queue), collections.deque()
            self._changed.notify_all()
        for request in queued:
            self._finish(request, error=Unavailable(f"{self.name} was unloaded while the request queued"))
        for thread in self._threads:
            thread.join()

    def _wait(self, request: _Request, context) -> None:
        """Until the request's batch answers it, or it must stop: it leaves the queue, or its running batch's
        answer is dropped."""
        client_s = context.time_remaining()
        deadline = None if client_s is None or client_s >= NO_DEADLINE_S else time.monotonic() + client_s
        while not request.done.wait(SLOT_POLL_S if deadline is None else
                                    max(0.0, min(SLOT_POLL_S, deadline - time.monotonic()))):
            if deadline is not None and time.monotonic() >= deadline:
                self._leave(request)
                raise DeadlineExceeded(f"the client's deadline passed while the request waited in {self.name}'s "
                                       "batch queue or batch")
            if not context.is_active():
                self._leave(request)
                raise Cancelled(f"the client cancelled the call or went away while it waited in {self.name}'s "
                                "batch queue or batch")

    def _leave(self, request: _Request) -> None:
        """Out of the queue if it is still there (a batch may have taken it: its answer is dropped)."""
        with self._changed:
            if request in self._queue:
                self._queue.remove(request)
                self._changed.notify_all()

    # --- The scheduler thread --------------------------------------------------------------------

    def _schedule(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            self._execute(batch)

    def _next_batch(self) -> list[_Request] | None:
        """The oldest requests that fit in max_batch_size rows, once they fill a batch or the oldest has waited
        max_queue_delay; None once closed."""
        with self._changed:
            while True:
                if self._closed:
                    return None
                if self._queue:
                    batch, rows = self._fitting()
                    wait_s = self._queue[0].queued + self.max_queue_delay_s - time.perf_counter()
                    if rows >= self._full_rows or wait_s <= 0:
                        for request in batch:
                            self._queue.remove(request)
                        return batch
                    self._changed.wait(wait_s)
                else:
                    self._changed.wait()

    def _fitting(self) -> tuple[list[_Request], int]:
        """The queued requests, oldest first, that fit together in max_batch_size rows (none is passed over: a
        large request is not starved by small ones behind it)."""
        batch, rows = [], 0
        for request in self._queue:
            if rows + request.rows > self.max_batch_size:
                break
            batch.append(request)
            rows += request.rows
        return batch, rows

    def _execute(self, batch: list[_Request]) -> None:
        """Runs the merged batch once and hands each request its rows (or the batch's error)."""
        started = time.perf_counter()
        for request in batch:
            request.started = started
        try:
            merged = {name: np.concatenate([r.inputs[name] for r in batch]) if len(batch) > 1 else array
                      for name, array in batch[0].inputs.items()}
            outputs, times = self._run(merged)
        except Exception as e:  # the batch's error is each of its requests' error
            log.info("%s: a batch of %d requests failed: %s", self.name, len(batch), e)
            for request in batch:
                self._finish(request, error=e)
            return
        offset = 0
        for request in batch:
            request.times = times
            self._finish(request, outputs={name: out[offset:offset + request.rows] for name, out in outputs.items()})
            offset += request.rows

    @staticmethod
    def _finish(request: _Request, outputs: Arrays | None = None, error: BaseException | None = None) -> None:
        request.outputs, request.error = outputs, error
        request.done.set()
