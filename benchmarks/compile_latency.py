"""Compile latency: xlacs cold, L1 hit and L2 hit (a fresh `xlacs serve` on the same Redis), against TF's
`jit_compile=True` first call and tf2jax + jax.jit first call, round by round."""
from __future__ import annotations

import pathlib
import statistics

from benchmarks import peers
from benchmarks.models import Model, tiny_add
from benchmarks.processes import RedisServer, ServeProcess, redis_env
from benchmarks.timing import timed, timed_result


def _warm_up_peers() -> None:
    """The first XLA compile of a process pays for initialisation that no later one does, in TF and in JAX;
    the server processes are warmed the same way, by a tiny compile before the measured ones."""
    tiny = tiny_add()
    pruned = peers.tf_graph_function(tiny)
    peers.tf_xla(pruned)(*tiny.inputs)
    if peers.tf2jax is not None:
        peers.tf2jax_jit(pruned, tiny)(*tiny.inputs)


def _xlacs_round(models: list[Model], directory: pathlib.Path, redis_server: RedisServer, l1_repeats: int,
                 results: dict) -> None:
    redis_server.flush()
    first = ServeProcess(directory, redis_env(redis_server))
    try:
        first.warm_up(tiny_add())
        with first.client() as client:
            for model in models:
                row = results[model.name]
                compile_ms, executable = _timed_compile(client, model, "miss", row, "cold")
                row["cold_first_result_ms"].append(compile_ms + timed(lambda: executable(*model.inputs)))
                for _ in range(l1_repeats):
                    _timed_compile(client, model, "l1", row, "l1")
        second = ServeProcess(directory, redis_env(redis_server))
        try:
            second.warm_up(tiny_add())
            with second.client() as client:
                for model in models:
                    _timed_compile(client, model, "l2", results[model.name], "l2")
        finally:
            second.stop()
    finally:
        first.stop()


def _timed_compile(client, model: Model, tier: str, row: dict, label: str):
    """Times one Compile that `tier` must answer; records the time and the server's stages under `label`."""
    ms, executable = timed_result(lambda: model.compile(client))
    if executable.cache != tier:
        raise RuntimeError(f"{model.name}: expected a {tier!r} compile, the server answered {executable.cache!r}")
    row[f"{label}_ms"].append(ms)
    row[f"{label}_stage_ms"] = executable.stage_ms
    return ms, executable


def _peer_round(models: list[Model], pruned: dict, results: dict, built: dict) -> None:
    """TF XLA and tf2jax first calls, each peer built anew (a new function) so that it compiles again."""
    for model in models:
        row = results[model.name]
        for peer, build in (("tf_xla_first_ms", lambda: peers.tf_xla(pruned[model.name])),
                            ("tf2jax_first_ms", lambda: peers.tf2jax_jit(pruned[model.name], model))):
            if peer in row["errors"]:
                continue
            try:
                ms, call, _ = peers.first_call_ms(build, model.inputs)
            except peers.PeerFailed as e:
                row["errors"][peer] = str(e)
                continue
            row[peer].append(ms)
            built[model.name][peer] = call


def measure(models: list[Model], directory: pathlib.Path, redis_server: RedisServer, rounds: int,
            l1_repeats: int) -> tuple[dict, dict]:
    """(results per model, the TF XLA and tf2jax peers of the last round per model, for the execute step)."""
    _warm_up_peers()
    pruned = {model.name: peers.tf_graph_function(model) for model in models}
    results = {model.name: {"cold_ms": [], "cold_first_result_ms": [], "l1_ms": [], "l2_ms": [],
                            "tf_xla_first_ms": [], "tf2jax_first_ms": [], "errors": {}} for model in models}
    built = {model.name: {} for model in models}
    for _ in range(rounds):
        _xlacs_round(models, directory, redis_server, l1_repeats, results)
        _peer_round(models, pruned, results, built)
    for row in results.values():
        row["median_ms"] = {k: statistics.median(v) for k, v in row.items()
                            if k.endswith("_ms") and isinstance(v, list) and v}
    return results, built
