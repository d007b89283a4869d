"""Executions the daemon can stop: programs run in worker processes (worker.py) that are killed and replaced
when a run outlives its time limit or crashes, so a runaway loop never holds an Execute slot for ever.

XLA cannot interrupt a running program, and a program without a While always ends, so by default only
programs with loops run in workers (`isolate_executions="loops"`); "all" runs every program there, which
also keeps a native crash of any program from taking the daemon down, at the cost of a copy of the inputs
and outputs through a pipe.
"""
from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from typing import Callable

import jax
import numpy as np

from xlacs_server.errors import DeadlineExceeded, XlacsError
from xlacs_server.execute import frames, worker
from xlacs_server.execute.devices import DeviceRef

log = logging.getLogger(__name__)

ISOLATION_POLICIES = ("loops", "all")
_CONTEXT = multiprocessing.get_context("spawn")  # a fresh interpreter: forking a process that runs XLA is unsafe


class WorkerFailed(XlacsError):
    """The worker running a program died (a native crash) or reported an error: a fault of xlacs or XLA."""


def has_loops(stablehlo: str) -> bool:
    return "stablehlo.while" in stablehlo


class Worker:
    def __init__(self, device: DeviceRef):
        self.connection, child = _CONTEXT.Pipe()
        index = jax.devices(device.platform).index(device.device)
        self.process = _CONTEXT.Process(target=worker.main, args=(child, device.platform, index),
                                        name=f"xlacs execution worker ({device.name})", daemon=True)
        self.process.start()
        child.close()

    def call(self, message: bytes, timeout_s: float | None) -> tuple[dict, list[memoryview]]:
        """The worker's reply; TimeoutError when it has none within `timeout_s`; EOFError if it died."""
        self.connection.send_bytes(message)
        if not self.connection.poll(timeout_s):
            raise TimeoutError
        header, buffers = frames.decode(self.connection.recv_bytes())
        if not header["ok"] and "error" in header:
            raise WorkerFailed(f"the execution worker failed: {header['error']}")
        return header, buffers

    def kill(self) -> None:
        self.process.kill()
        self.process.join()
        self.connection.close()


class WorkerPool:
    """Workers for one device. A run takes an idle worker (or starts one); a worker whose run times out or
    dies is killed, and a replacement starts at once in the background, so the next run finds it ready."""

    def __init__(self, device: DeviceRef):
        self.device = device
        self._idle: list[Worker] = []
        self._lock = threading.Lock()
        self.started = self.killed = self.crashed = 0
        self._closed = False

    def run(self, executable_id: str, load: Callable[[], tuple[bytes, list[np.ndarray]]], inputs: list[np.ndarray],
            timeout_s: float | None, why: str) -> list[np.ndarray]:
        """The outputs of `executable_id` on `inputs`; `load()` gives what a worker that lacks the program loads
        (the serialized program and its weights). Past `timeout_s` the worker is killed and the call is
        DEADLINE_EXCEEDED, `why` naming the limit."""
        # The limit runs from now, whatever a worker's start or a load costs first.
        end = None if timeout_s is None else time.monotonic() + timeout_s
        left = lambda: None if end is None else max(0.0, end - time.monotonic())  # noqa: E731
        worker = self._take()
        run = frames.encode({"op": "run", "id": executable_id, "inputs": frames.array_specs(inputs)},
                            frames.array_bytes(inputs))
        try:
            header, buffers = worker.call(run, left())
            if header.get("missing"):
                serialized, weights = load()
                worker.call(frames.encode({"op": "load", "id": executable_id, "weights": frames.array_specs(weights)},
                                          [serialized, *frames.array_bytes(weights)]), left())
                header, buffers = worker.call(run, left())
        except TimeoutError:
            self._replace(worker, "killed")
            raise DeadlineExceeded(f"the execution ran past {why}; its worker process was stopped, and the next "
                                   "execution runs in a fresh one") from None
        except (EOFError, OSError) as e:
            self._replace(worker, "crashed")
            raise WorkerFailed(f"the execution worker died while running the program (exit code "
                               f"{worker.process.exitcode}): {type(e).__name__}") from None
        except WorkerFailed:
            self._give_back(worker)
            raise
        self._give_back(worker)
        return [a.copy() for a in frames.arrays(header["outputs"], buffers)]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for w in idle:
            w.kill()

    def _take(self) -> Worker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            self.started += 1
        return Worker(self.device)

    def _give_back(self, worker: Worker) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(worker)
                return
        worker.kill()

    def _replace(self, worker: Worker, why: str) -> None:
        worker.kill()
        with self._lock:
            setattr(self, why, getattr(self, why) + 1)
            self.started += 1
        log.warning("execution worker on %s %s; starting a replacement", self.device.name, why)
        threading.Thread(target=lambda: self._give_back(Worker(self.device)), daemon=True,
                         name="start execution worker").start()


class Workers:
    """The execution workers of every device, started on first use."""

    def __init__(self):
        self._pools: dict[str, WorkerPool] = {}
        self._lock = threading.Lock()

    def pool(self, device: DeviceRef) -> WorkerPool:
        with self._lock:
            if device.name not in self._pools:
                self._pools[device.name] = WorkerPool(device)
            return self._pools[device.name]

    def pools(self) -> list[WorkerPool]:
        with self._lock:
            return list(self._pools.values())

    def close(self) -> None:
        for pool in self.pools():
            pool.close()
