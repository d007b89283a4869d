"""Issue 15: what a rewrite buys. The xlacs program of each model as it compiles by default, beside variants built
without some rewrites (an XLA:CPU lowering override of lower/ops/cpu.py, taken out so the op's generic rule
lowers it, or a pass, left out of the pipeline), and TF graph mode, in one run. Every variant is compiled in this
process with the default settings; turns interleave as in benchmarks/xla_cpu_options.py.

    .venv/bin/python -m benchmarks.rewrites --models InceptionV3,ResNet50 \
        --without again= pools=MaxPool,MaxPoolV2,AvgPool fold=fold_batch_norm [--rounds 25 --seconds 0.25]

A variant without any rewrite (`again=`) is the default program once more: how far apart two copies of one
program come out is the noise of the run.
"""
from __future__ import annotations

import argparse
import contextlib
import functools

from benchmarks.peers import Call
from benchmarks.peers.files import GraphFiles
from benchmarks.xla_cpu_options import build_options, report
from xlacs_server.config import Settings
from xlacs_server.lower import registry
from xlacs_server.passes import registry as passes


@contextlib.contextmanager
def without(rewrites: tuple[str, ...]):
    """The registries without these XLA:CPU overrides (by op) and passes (by name), while a program builds."""
    overrides = {op: registry._REGISTRY.pop((op, "cpu")) for op in rewrites if (op, "cpu") in registry._REGISTRY}
    unknown = set(rewrites) - set(overrides) - {p.name for p in passes._PASSES}
    kept = list(passes._PASSES)
    try:
        if unknown:
            raise SystemExit(f"neither an XLA:CPU override nor a pass: {', '.join(sorted(unknown))}")
        passes._PASSES[:] = [p for p in kept if p.name not in rewrites]
        yield
    finally:
        passes._PASSES[:] = kept
        registry._REGISTRY.update({(op, "cpu"): lowering for op, lowering in overrides.items()})


def build_without(rewrites: tuple[str, ...], graph: GraphFiles) -> Call:
    with without(rewrites):
        return build_options(Settings().xla_options, graph)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="ResNet50,MobileNetV2,EfficientNetB0,DenseNet121,InceptionV3")
    parser.add_argument("--without", nargs="+", default=[], help="NAME=REWRITE,REWRITE ...: an op or a pass each")
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--seconds", type=float, default=0.25)
    args = parser.parse_args()
    builds = {"default": functools.partial(build_without, ())}
    for spec in args.without:
        name, _, rewrites = spec.partition("=")
        builds[name] = functools.partial(build_without, tuple(r for r in rewrites.split(",") if r))
    report(args.models.split(","), builds, args.rounds, args.seconds)


if __name__ == "__main__":
    main()
