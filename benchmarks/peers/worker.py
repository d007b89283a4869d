"""One peer in its own process, driven by the benchmark over stdin/stdout, one JSON object a line each way:

    {"op": "build", "graph": DIR}                        -> {"first_call_ms": ms}: builds anew, first result
    {"op": "time", "graph": DIR, "seconds": s, "min_calls": n} -> {"ms": [...]}: one turn of calls
    {"op": "outputs", "graph": DIR, "out": DIR2}         -> {"outputs": [paths]}: the results as .npy files
    {"op": "drop", "graph": DIR}                         -> {}: forgets the build, and its memory
    {"op": "load", "graph": DIR, "concurrency": n, "seconds": s} -> timing.under_load's summary: n threads
                                                            sharing the built peer, back to back

A graph is a directory of benchmarks/peers/files.py; every op answers {"error": text} instead when the peer
cannot do it. The process ends when stdin closes.

    python -m benchmarks.peers.worker PEER
"""
from __future__ import annotations

import gc
import importlib
import json
import os
import pathlib
import sys
import time

import numpy as np

from benchmarks.peers import BUILDERS, Call
from benchmarks.peers.files import GraphFiles
from benchmarks.timing import calls_for, under_load


def _error_text(e: BaseException) -> str:
    """The exception's type and first line: TF, JAX and the runtimes raise many types for graphs they cannot
    build, and the report says which."""
    first = str(e).splitlines()[0][:300] if str(e) else ""
    return f"{type(e).__name__}: {first}"


class Worker:
    def __init__(self, peer: str):
        module, _, function = BUILDERS[peer].partition(":")
        try:
            self.builder = getattr(importlib.import_module(module), function)
            self.missing = ""
        except ImportError as e:  # reported by every build, so that the report names what to install
            self.builder, self.missing = None, f"{peer} cannot be imported ({e}): scripts/bench installs it"
        self.built: dict[str, tuple[Call, list[np.ndarray]]] = {}

    def build(self, graph: str) -> dict:
        """Builds the peer anew for `graph`, so that its first call pays every compile again."""
        if self.builder is None:
            return {"error": self.missing}
        self.built.pop(graph, None)
        inputs = GraphFiles(pathlib.Path(graph)).inputs()
        start = time.perf_counter()
        call = self.builder(GraphFiles(pathlib.Path(graph)))
        call(*inputs)
        ms = (time.perf_counter() - start) * 1e3
        self.built[graph] = call, inputs
        return {"first_call_ms": ms}

    def time(self, graph: str, seconds: float, min_calls: int) -> dict:
        call, inputs = self.built[graph]
        return {"ms": calls_for(lambda: call(*inputs), seconds, min_calls)}

    def load(self, graph: str, concurrency: int, seconds: float) -> dict:
        """The engine's throughput as an application that shares it between `concurrency` threads gets it."""
        call, inputs = self.built[graph]
        return under_load([lambda: call(*inputs)] * concurrency, seconds)

    def drop(self, graph: str) -> dict:
        self.built.pop(graph, None)
        gc.collect()
        return {}

    def outputs(self, graph: str, out: str) -> dict:
        call, inputs = self.built[graph]
        directory = pathlib.Path(out)
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for i, array in enumerate(call(*inputs)):
            paths.append(str(directory / f"output-{i}.npy"))
            np.save(paths[-1], np.asarray(array), allow_pickle=False)
        return {"outputs": paths}

    def answer(self, command: dict) -> dict:
        ops = {"build": self.build, "time": self.time, "load": self.load, "drop": self.drop,
               "outputs": self.outputs}
        op = command.pop("op")
        if op not in ops:
            return {"error": f"unknown op {op!r}; the ops are {', '.join(ops)}"}
        try:
            return ops[op](**command)
        except Exception as e:  # the peer failed this graph: the benchmark records why and goes on
            return {"error": _error_text(e)}


def main() -> None:
    # Replies go to the original stdout; anything the engines print goes to stderr (the peer's log), where it
    # cannot break a reply.
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    worker = Worker(sys.argv[1])
    for line in sys.stdin:
        replies.write(json.dumps(worker.answer(json.loads(line))) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
