"""The benchmark's side of the peer processes: each peer of benchmarks/peers runs as
`python -m benchmarks.peers.worker PEER`, with its log in the run's directory, and answers one command at a
time, so that only the peer whose turn it is runs. All of them start at once (their imports overlap) and stop
together."""
from __future__ import annotations

import collections
import json
import os
import pathlib
import re
import select
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import numpy as np

from benchmarks.peers import BUILDERS, PeerFailed, runs
from benchmarks.peers.files import GraphFiles, write_graph_files
from xlacs_server.daemon_process import resident_bytes

if TYPE_CHECKING:
    from benchmarks.models import Model

ROOT = pathlib.Path(__file__).resolve().parents[2]
# A build compiles a whole graph (XLA, tf2onnx, OpenVINO) on a possibly busy machine: past this it is stuck.
BUILD_TIMEOUT_S = 1800
# What a turn may take beyond its own seconds (a slow peer's minimum calls) before it counts as stuck.
TURN_MARGIN_S = 600
STOP_TIMEOUT_S = 30
# Builds a peer keeps: the model being measured and the one before. Ten models' builds held at once (tf2onnx's
# conversions and ONNX Runtime's sessions among them) took the ONNX Runtime process past 6.9 GB, and the kernel's
# out-of-memory killer ended it; a dropped build is built again when it is next needed.
MAX_BUILT = 2
# A peer whose process holds more than this share of the machine's memory ends, and a new one takes its place,
# before its next build. A process starts at about 0.7 GB. With twelve models on 23.5 GiB, TF XLA's grew to 5.3 GB,
# TF graph mode's to 3.9 GB and tf2jax's to 3.2 GB (builds dropped, their memory not given back), until tf2onnx's
# conversion of InceptionV3 (ONNX Runtime's process from 1 to 6.7 GB) found none left: the kernel's
# out-of-memory killer ended ONNX Runtime's process, and TF XLA's at BertEncoder-b8.
MEMORY_SHARE = 1 / 10
MAX_RSS_BYTES = int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * MEMORY_SHARE)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


class PeerProcess:
    """One peer's process. A build that fails is remembered per graph: `ready` raises its reason again."""

    def __init__(self, peer: str, directory: pathlib.Path):
        self.peer = peer
        self.directory = directory
        self.max_rss_bytes = MAX_RSS_BYTES
        self.log = directory / f"peer-{_slug(peer)}.log"
        self.log.write_text("")
        self.failures: dict[pathlib.Path, str] = {}
        self.warm_up: pathlib.Path | None = None  # the first graph it built: a new process builds it first
        self._start()

    def _start(self) -> None:
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.peers.worker", self.peer], cwd=ROOT, text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        self.built: collections.OrderedDict[pathlib.Path, None] = collections.OrderedDict()  # least recent first

    def _alive(self) -> None:
        """A process that has ended (the kernel's out-of-memory killer ended one) is started again before the next
        build: the model it died on failed, the models after it get a process of their own."""
        if self.process.poll() is not None:
            self._restart(f"ended ({self._exited()})")

    def _within_memory(self) -> None:
        """A process that has built since it started and holds more than max_rss_bytes (MEMORY_SHARE) ends, and a
        new one takes its place; its builds are lost."""
        if self.built and (rss := resident_bytes(self.process.pid)) > self.max_rss_bytes:
            self.stop()
            self._restart(f"held {rss / 2**30:.1f} GiB, over its {self.max_rss_bytes / 2**30:.1f} GiB")

    def _restart(self, why: str) -> None:
        """A new process, which builds the first graph the last one built and drops it: a process's first build pays
        for initialising its engine, and the first calls it times must not (compile_latency's warm-up)."""
        with open(self.log, "a") as log:
            log.write(f"--- {self.peer} {why}; started again\n")
        self._start()
        if self.warm_up is not None:
            self._request(BUILD_TIMEOUT_S, op="build", graph=str(self.warm_up))
            self._request(TURN_MARGIN_S, op="drop", graph=str(self.warm_up))

    def _exited(self) -> str:
        status = self.process.poll()
        if status is not None and status < 0:  # a signal ended it: the log's last line says nothing of why
            why = f"was killed by {signal.Signals(-status).name}" + (
                " (the kernel's out-of-memory killer sends it: see dmesg)" if -status == signal.SIGKILL else "")
            return f"the {self.peer} process {why} (log: {self.log})"
        lines = [line for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        return (f"the {self.peer} process exited with status {status}"
                + (f": {lines[-1][:300]}" if lines else "") + f" (log: {self.log})")

    def _request(self, timeout_s: float, **command) -> dict:
        try:
            self.process.stdin.write(json.dumps(command) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            self.process.wait(timeout=STOP_TIMEOUT_S)
            raise PeerFailed(self._exited()) from None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        if not ready:
            self.process.kill()
            self.process.wait(timeout=STOP_TIMEOUT_S)
            raise PeerFailed(f"{self.peer} did not answer {command['op']!r} within {timeout_s:.0f} s and was "
                             f"stopped (log: {self.log})")
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=STOP_TIMEOUT_S)
            raise PeerFailed(self._exited())
        reply = json.loads(line)
        if "error" in reply:
            raise PeerFailed(reply["error"])
        return reply

    def build(self, graph: GraphFiles) -> float:
        """Builds the peer anew for `graph`: milliseconds to build it and get its first result."""
        self._alive()
        self._within_memory()
        self.built.pop(graph.directory, None)
        try:
            ms = self._request(BUILD_TIMEOUT_S, op="build", graph=str(graph.directory))["first_call_ms"]
        except PeerFailed as e:
            self.failures[graph.directory] = str(e)
            raise
        self.failures.pop(graph.directory, None)
        self.warm_up = self.warm_up or graph.directory
        self.built[graph.directory] = None
        while len(self.built) > MAX_BUILT:
            self._request(TURN_MARGIN_S, op="drop", graph=str(self.built.popitem(last=False)[0]))
        return ms

    def ready(self, graph: GraphFiles) -> None:
        """Builds the peer for `graph` unless it is built; raises PeerFailed if its last build failed."""
        if graph.directory in self.failures:
            raise PeerFailed(self.failures[graph.directory])
        self._alive()
        if graph.directory in self.built:
            self.built.move_to_end(graph.directory)
        else:
            self.build(graph)

    def turn(self, graph: GraphFiles, seconds: float, min_calls: int) -> list[float]:
        """One turn of benchmarks/timing.py: milliseconds of each call, timed in the peer's process."""
        return self._request(seconds + TURN_MARGIN_S, op="time", graph=str(graph.directory), seconds=seconds,
                             min_calls=min_calls)["ms"]

    def load(self, graph: GraphFiles, concurrency: int, seconds: float) -> dict:
        """`concurrency` threads of the peer's process share its engine, back to back, for `seconds`."""
        return self._request(seconds + TURN_MARGIN_S, op="load", graph=str(graph.directory),
                             concurrency=concurrency, seconds=seconds)

    def outputs(self, graph: GraphFiles) -> list[np.ndarray]:
        out = self.directory / "outputs" / _slug(self.peer) / graph.directory.name
        paths = self._request(TURN_MARGIN_S, op="outputs", graph=str(graph.directory), out=str(out))["outputs"]
        return [np.load(path) for path in paths]

    def close(self) -> None:
        """Closes its stdin, which ends the worker."""
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass  # the worker has ended already (killed, or it crashed): stop() reaps it

    def stop(self) -> None:
        """Ends the worker; kills it if it does not end."""
        self.close()
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=STOP_TIMEOUT_S)


class PeerProcesses:
    """A process for each of `peers`, and the graphs they were given, under `directory`."""

    def __init__(self, directory: pathlib.Path, peers: tuple[str, ...] = tuple(BUILDERS)):
        self.directory = directory
        self._graphs: dict[str, GraphFiles] = {}
        self.processes: dict[str, PeerProcess] = {}
        try:
            for peer in peers:
                self.processes[peer] = PeerProcess(peer, directory)
        except BaseException:
            self.stop()
            raise

    def graph(self, model: "Model") -> GraphFiles:
        """The model's graph files, written the first time they are asked for."""
        if model.name not in self._graphs:
            frozen = model.frozen
            self._graphs[model.name] = write_graph_files(
                self.directory / "graphs" / _slug(model.name), frozen.graph_def, frozen.feeds, frozen.fetches,
                model.inputs)
        return self._graphs[model.name]

    def for_model(self, model: "Model") -> dict[str, PeerProcess]:
        """The peers that run `model`, in the report's order."""
        return {peer: process for peer, process in self.processes.items() if runs(peer, model.name)}

    def stop(self) -> None:
        """Every worker at once (they end side by side), then waits for each."""
        for process in self.processes.values():
            process.close()
        for process in self.processes.values():
            process.stop()

    def __enter__(self) -> "PeerProcesses":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
