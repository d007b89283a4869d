"""Issue 15: XLA:CPU option sets against TF graph mode, side by side in one run. Each option set is an xlacs
program compiled in this process (benchmarks/peers/xlacs_program.py, no RPC); TF graph mode runs in its own
process (benchmarks/peers). Turns are short and interleaved (TF, then each option set, again and again), so that
the load of a shared machine falls on all of them alike. Prints one line per model and a JSON summary.

    .venv/bin/python -m benchmarks.xla_cpu_options --models ResNet50,MobileNetV2 \
        --options 'ynnpack=-xla_cpu_experimental_ynn_fusion_type' 'default=' [--rounds 25 --seconds 0.25]

An option set is NAME=ITEM;ITEM with ITEMs as XLACS_XLA_OPTIONS spells them (a value may hold commas), over xlacs's
default options.
"""
from __future__ import annotations

import argparse
import functools
import json
import pathlib
import tempfile
import time
from typing import Callable

import numpy as np

from benchmarks import models
from benchmarks.peers import TF_GRAPH, Call, largest_error
from benchmarks.peers.files import GraphFiles, write_graph_files
from benchmarks.peers.remote import PeerProcess
from benchmarks.peers.xlacs_program import build_with
from benchmarks.timing import calls_for
from xlacs_server.config import Settings


def option_set(spec: str) -> tuple[str, tuple[str, ...]]:
    name, _, items = spec.partition("=")
    return name, tuple(item for item in items.split(";") if item)


def measure(model: models.Model, directory: pathlib.Path, tf: PeerProcess,
            builds: dict[str, Callable[[GraphFiles], Call]], rounds: int, seconds: float) -> dict:
    """Each of `builds` (name -> how to build the program of a graph) against TF graph mode, interleaved."""
    graph = write_graph_files(directory / model.name, model.frozen.graph_def, model.frozen.feeds,
                              model.frozen.fetches, model.inputs)
    tf.ready(graph)
    reference = tf.outputs(graph)
    calls, result = {}, {}
    for name, build in builds.items():
        start = time.perf_counter()
        call = build(graph)
        result[name] = {"cold_ms": (time.perf_counter() - start) * 1e3,
                        "error": largest_error(call(*model.inputs), reference)}
        calls[name] = call
    samples = {TF_GRAPH: [], **{name: [] for name in calls}}
    names = list(calls)
    for turn in range(rounds):
        samples[TF_GRAPH] += tf.turn(graph, seconds, 3)
        for name in names[turn % len(names):] + names[:turn % len(names)]:  # each takes each place in turn
            samples[name] += calls_for(lambda: calls[name](*model.inputs), seconds, 3)
    tf_p50 = float(np.median(samples[TF_GRAPH]))
    result[TF_GRAPH] = {"p50_ms": tf_p50}
    for name in calls:
        result[name]["p50_ms"] = float(np.median(samples[name]))
        result[name]["vs_tf_graph"] = result[name]["p50_ms"] / tf_p50
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="ResNet50,MobileNetV2,EfficientNetB0,DenseNet121,InceptionV3")
    parser.add_argument("--options", nargs="+", default=["default="], help="NAME=ITEM;ITEM ...")
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--seconds", type=float, default=0.25)
    args = parser.parse_args()
    report(args.models.split(","), option_builds(dict(map(option_set, args.options))), args.rounds, args.seconds)


def option_builds(option_sets: dict[str, tuple[str, ...]]) -> dict[str, Callable[[GraphFiles], Call]]:
    """name -> how to build a graph's program with that set of XLA options."""
    return {name: functools.partial(build_options, items) for name, items in option_sets.items()}


def build_options(items: tuple[str, ...], graph: GraphFiles) -> Call:
    return build_with(graph, Settings(cache_dir="", xla_options=items))


def report(model_names: list[str], builds: dict[str, Callable[[GraphFiles], Call]], rounds: int,
           seconds: float) -> None:
    """Measures every model, one line each as it goes, then the JSON summary."""
    summary = {}
    with tempfile.TemporaryDirectory(prefix="xlacs-cpu-options-") as tmp:
        tf = PeerProcess(TF_GRAPH, pathlib.Path(tmp))
        try:
            for model in models.build(model_names):
                summary[model.name] = measure(model, pathlib.Path(tmp), tf, builds, rounds, seconds)
                print(model.name, " ".join(f"{name} {r['p50_ms']:.1f} ms" + (f" ({r['vs_tf_graph']:.2f}x)"
                                                                            if "vs_tf_graph" in r else "")
                                           for name, r in summary[model.name].items()), flush=True)
        finally:
            tf.stop()
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
