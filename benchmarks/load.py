"""Issue 35: throughput under load. ResNet50 and BertEncoder at 1, 4 and 16 concurrent clients: xlacs with N
clients of the daemon (each on its own channel and thread, in this process), against each in-process peer whose
N threads share its engine in the peer's own process, on the same input. The runners take turns, one at a time,
in a reversed order every other round, so that load from elsewhere falls on all of them."""
from __future__ import annotations

import functools
import time
from typing import Callable

import numpy as np

from benchmarks import throughput
from benchmarks.models import Model
from benchmarks.peers import IN_PROCESS, ONNX_RUNTIME, OPENVINO, TF_GRAPH, XLACS, PeerFailed
from benchmarks.peers.remote import PeerProcesses
from benchmarks.timing import under_load

MODELS = ("ResNet50", "BertEncoder")
CLIENTS = (1, 4, 16)
# The engines an application would embed in its own process to serve these requests.
PEERS = (TF_GRAPH, OPENVINO, ONNX_RUNTIME, IN_PROCESS)
GOAL_MODEL, GOAL_CLIENTS = "ResNet50", 16


def _mean(rounds: list[dict]) -> dict:
    """The rounds of one runner together: their mean throughput and latencies, and the worst p99."""
    return {"requests_per_s": float(np.mean([r["requests_per_s"] for r in rounds])),
            "p50_ms": float(np.mean([r["p50_ms"] for r in rounds])),
            "p99_ms": float(np.max([r["p99_ms"] for r in rounds])),
            "n": int(np.sum([r["n"] for r in rounds]))}


def _turns(runners: dict[str, Callable[[float], dict]], seconds: float, rounds: int, errors: dict) -> dict:
    """Each runner's `seconds` in `rounds` turns, the order reversed every other round; a peer that fails goes
    into `errors`."""
    measured = {name: [] for name in runners}
    order = list(runners)
    for turn in range(rounds):
        for name in order if turn % 2 == 0 else order[::-1]:
            try:
                measured[name].append(runners[name](seconds / rounds))
            except PeerFailed as e:
                errors[name] = str(e)
    return {name: _mean(r) for name, r in measured.items() if r}


def measure_model(address: str, peers: PeerProcesses, model: Model, concurrencies: tuple[int, ...],
                  seconds: float, rounds: int = 2) -> dict:
    """Per concurrency, every runner's throughput (`seconds` each in all, over `rounds` turns) and xlacs'
    against the best peer's."""
    graph = peers.graph(model)
    running, errors = {}, {}
    for name, peer in peers.for_model(model).items():
        if name in PEERS:
            try:
                peer.ready(graph)
                running[name] = peer
            except PeerFailed as e:
                errors[name] = str(e)
    by_clients = {}
    with throughput.executables(address, model, max(concurrencies)) as executables:
        for n in concurrencies:
            calls = [functools.partial(e, *model.inputs) for e in executables[:n]]
            runners = {XLACS: functools.partial(under_load, calls),
                       **{name: functools.partial(peer.load, graph, n) for name, peer in running.items()}}
            row = _turns(runners, seconds, rounds, errors)
            best = max((name for name in row if name != XLACS), key=lambda name: row[name]["requests_per_s"],
                       default=None)
            by_clients[str(n)] = {"runners": row, "best_peer": best, "xlacs_over_best": (
                row[XLACS]["requests_per_s"] / row[best]["requests_per_s"] if best else None)}
    return {"by_clients": by_clients, "errors": errors}


def measure(address: str, peers: PeerProcesses, models: list[Model], concurrencies: tuple[int, ...],
            seconds: float) -> dict:
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    return {"seconds": seconds, "started": started,
            "models": {model.name: measure_model(address, peers, model, concurrencies, seconds) for model in models}}
