"""Compile latency: xlacs cold, L1 hit and L2 hit (a fresh `xlacs serve` on the same Redis), against every
peer's first call (build + first result: TF's `jit_compile=True`, tf2jax + jax.jit, OpenVINO's and ONNX
Runtime's load, ...), round by round, each peer in its own process."""
from __future__ import annotations

import contextlib
import pathlib
import statistics

from benchmarks.models import Model, tiny_add
from benchmarks.peers import PeerFailed
from benchmarks.peers.remote import PeerProcesses
from benchmarks.processes import RedisServer, ServeProcess, redis_env
from benchmarks.timing import timed, timed_result


def _warm_up(peers: PeerProcesses) -> None:
    """The first compile of a process pays for initialisation that no later one does (TF, JAX, the runtimes'
    plugins); the server processes are warmed the same way, by a tiny compile before the measured ones."""
    tiny = tiny_add()
    for peer in peers.processes.values():
        # A peer that cannot build even the tiny graph fails each model too, and the report says why there.
        with contextlib.suppress(PeerFailed):
            peer.build(peers.graph(tiny))


def _xlacs_round(models: list[Model], directory: pathlib.Path, redis_server: RedisServer, l1_repeats: int,
                 results: dict) -> None:
    redis_server.flush()
    first = ServeProcess(directory, redis_env(redis_server))
    try:
        first.warm_up(tiny_add())
        with first.client() as client:
            for model in models:
                row = results[model.name]
                compile_ms, executable = _timed_compile(client, model, "miss", row, "cold", wait_optimized=False)
                first_ms = compile_ms + timed(lambda: executable(*model.inputs))
                row["cold_first_result_ms"].append(first_ms)
                row["cold_tier"] = executable.tier
                # Until the optimized program replaced a tiered compile's quick one; the L2 hits below load it.
                row["cold_optimized_ms"].append(first_ms + timed(executable.wait_optimized))
                # What xlacs did to this graph; XLA flags join them once the daemon reports its choice.
                row["cold_passes"] = [[p.name, p.nodes_before, p.nodes_after] for p in executable.passes]
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


def _timed_compile(client, model: Model, tier: str, row: dict, label: str, wait_optimized: bool = True):
    """Times one Compile that `tier` must answer; records the time and the server's stages under `label`."""
    ms, executable = timed_result(lambda: model.compile(client, wait_optimized))
    if executable.cache != tier:
        raise RuntimeError(f"{model.name}: expected a {tier!r} compile, the server answered {executable.cache!r}")
    row[f"{label}_ms"].append(ms)
    row[f"{label}_stage_ms"] = executable.stage_ms
    return ms, executable


def _peer_round(models: list[Model], peers: PeerProcesses, results: dict) -> None:
    """Every peer's first call on every model, each peer built anew so that it compiles again; the last
    build stays in the peer's process for the execute step."""
    for model in models:
        row, graph = results[model.name], peers.graph(model)
        for name, peer in peers.for_model(model).items():
            if name in row["errors"]:
                continue
            try:
                ms = peer.build(graph)
            except PeerFailed as e:
                row["errors"][name] = str(e)
            else:
                row["peer_first_call_ms"].setdefault(name, []).append(ms)


def measure(models: list[Model], peers: PeerProcesses, directory: pathlib.Path, redis_server: RedisServer,
            rounds: int, l1_repeats: int) -> dict:
    _warm_up(peers)
    results = {model.name: {"cold_ms": [], "cold_first_result_ms": [], "cold_optimized_ms": [], "l1_ms": [],
                            "l2_ms": [], "peer_first_call_ms": {}, "errors": {}} for model in models}
    for _ in range(rounds):
        _xlacs_round(models, directory, redis_server, l1_repeats, results)
        _peer_round(models, peers, results)
    for row in results.values():
        row["median_ms"] = {k: statistics.median(v) for k, v in row.items()
                            if k.endswith("_ms") and isinstance(v, list) and v}
        row["peer_first_call_median_ms"] = {peer: statistics.median(v)
                                            for peer, v in row["peer_first_call_ms"].items()}
    return results
