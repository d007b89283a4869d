"""The side-by-side benchmark suite, in one run: xlacs against TensorFlow (graph mode and XLA), tf2jax,
OpenVINO, ONNX Runtime and in-process JAX, each peer in its own process, on the same frozen graphs and inputs.
Writes docs/benchmarks.md and docs/benchmarks.json.

    .venv/bin/python -m benchmarks.run [--quick] [--models MobileNetV2,LSTM] [--out DIR]
    .venv/bin/python -m benchmarks.run [--quick] --only compile_by_digest    # that section alone, into DIR's files
    .venv/bin/python -m benchmarks.run [--quick] --only transport    # the tiny round trip, transfer, client memory
    .venv/bin/python -m benchmarks.run [--quick] --only training    # the training step beside TF graph and TF XLA
    .venv/bin/python -m benchmarks.run [--quick] --only batching    # MobileNetV2 served with and without batching
    .venv/bin/python -m benchmarks.run [--quick] --only tfserving    # TF Serving's Predict beside ModelInfer
    .venv/bin/python -m benchmarks.run [--quick] --only load    # ResNet50 and BertEncoder under 1, 4 and 16 clients
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from benchmarks import (batching, compile_by_digest, compile_latency, execute_latency, load, machine,  # noqa: E402
                        models, profiles, report, scaling, shared_memory, tfserving, throughput, training, transport)
from benchmarks.peers import IN_PROCESS  # noqa: E402
from benchmarks.peers.remote import PeerProcesses  # noqa: E402
from benchmarks.processes import RedisServer, ServeProcess, redis_env  # noqa: E402
from benchmarks.raw_grpc import RawGrpc  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
THROUGHPUT_MODEL = "TransformerEncoder"


@dataclasses.dataclass(frozen=True)
class Budget:
    compile_rounds: int  # fresh server pairs (cold + L1, then L2) and every peer built anew
    l1_repeats: int
    execute_s: float  # per peer and model
    tiny_s: float  # per path
    transfer_mb: tuple[int, ...]
    transfer_s: float  # per size and direction
    concurrencies: tuple[int, ...]
    throughput_s: float  # per concurrency
    load_s: float  # per model, concurrency and runner (two turns each)
    chain_layers: tuple[int, ...]
    weight_mb: tuple[int, ...]
    profile_s: float
    training_s: float  # per optimizer, the three runners interleaved
    batching_s: float  # per round of each model (two rounds, alternating)
    tfserving_requests: int  # per API, way and round (two rounds)


MODES = {
    "quick": Budget(compile_rounds=1, l1_repeats=3, execute_s=1.5, tiny_s=2, transfer_mb=(1, 64), transfer_s=1,
                    concurrencies=(1, 4, 16, 64), throughput_s=2, load_s=4, chain_layers=(10, 100, 400),
                    weight_mb=(1, 16, 64), profile_s=2, training_s=2, batching_s=4, tfserving_requests=300),
    "full": Budget(compile_rounds=3, l1_repeats=10, execute_s=6, tiny_s=10, transfer_mb=(1, 64, 512),
                   transfer_s=5, concurrencies=(1, 4, 16, 64), throughput_s=8, load_s=10,
                   chain_layers=(10, 100, 400, 1000), weight_mb=(1, 16, 64, 256), profile_s=4, training_s=6, batching_s=10, tfserving_requests=1000),
}


def _step(name: str):
    print(f"[{time.strftime('%H:%M:%S')}] {name}", flush=True)


def _profiles(server: ServeProcess, client, by_name: dict, directory: pathlib.Path, redis_server: RedisServer,
              budget: Budget) -> list[dict]:
    """The tiny round trip, the 64 MB transfers and the L2 hits, each under the profilers."""
    out = []
    tiny = models.tiny_add()
    executable = tiny.compile(client)
    out.append(profiles.profile(server.pid, profiles.for_seconds(lambda: executable(*tiny.inputs), budget.profile_s),
                                directory, "tiny round trip"))
    for model in (models.upload(64 * models.MB), models.download(64 * models.MB)):
        executable = model.compile(client)
        out.append(profiles.profile(server.pid, profiles.for_seconds(lambda: executable(*model.inputs),
                                                                     budget.profile_s), directory, model.name))
    fresh = ServeProcess(directory, redis_env(redis_server))  # knows nothing: every model is an L2 hit
    try:
        fresh.warm_up(tiny)
        with fresh.client() as fresh_client:
            tiers = {}

            def l2_hits():
                for model in by_name.values():
                    tiers[model.name] = model.compile(fresh_client).cache
            # A tier other than "l2" means the key changed (the code under the daemons changed mid-run).
            out.append({**profiles.profile(fresh.pid, l2_hits, directory, "L2 hits", rate=1000), "tiers": tiers})
    finally:
        fresh.stop()
    return out


def _compile_by_digest(directory: pathlib.Path, redis_server: RedisServer, budget: Budget) -> dict:
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    figures = compile_by_digest.measure(directory, redis_server, budget.compile_rounds, budget.l1_repeats)
    return {**figures, "started": started, "finished": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def _transfer(client, env: dict, sizes_mb: list[int], seconds: float) -> dict:
    with RawGrpc(env) as raw:
        return transport.transfer(client, raw, sizes_mb, seconds)


def _transport(results: dict, server: ServeProcess, client, directory: pathlib.Path, budget: Budget) -> None:
    """Tensor transfer beside raw gRPC, the copy rates that bound it, and the client's peak memory."""
    results["transfer"] = _transfer(client, {}, list(budget.transfer_mb), budget.transfer_s)
    results["copy_rates"] = transport.copy_rates(64 * models.MB)
    results["client_memory"] = transport.client_memory(client, server.address, 64 * models.MB, directory)
    results["shared_memory"] = shared_memory.measure(client, budget.transfer_s)


def _transport_section(results: dict, directory: pathlib.Path, budget: Budget) -> None:
    """The tiny round trip (beside in-process JAX's peer alone) and _transport, on a daemon of their own."""
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    server = ServeProcess(directory)
    try:
        server.warm_up(models.tiny_add())
        with server.client() as client:
            with PeerProcesses(directory, (IN_PROCESS,)) as peers:
                _step("tiny round trip")
                results["tiny"] = transport.tiny_round_trip(client, peers, budget.tiny_s)
            _step("raw gRPC handlers that work")
            with RawGrpc() as raw:
                results["handler_floor"] = transport.handler_floor(raw, budget.tiny_s)
            _step("tensor transfer")
            _transport(results, server, client, directory, budget)
    finally:
        server.stop()
    results["transport_measured"] = {"started": started, "finished": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                                     "load_average": os.getloadavg()[0]}


def _training_section(results: dict, directory: pathlib.Path, budget: Budget) -> None:
    """The training step (benchmarks/training.py) on a daemon of its own."""
    server = ServeProcess(directory)
    try:
        with server.client() as client:
            _step("training step")
            results["training"] = {**training.measure(client, list(training.OPTIMIZERS), budget.training_s),
                                   "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    finally:
        server.stop()


def _load(server: ServeProcess, peers: PeerProcesses, by_name: dict, budget: Budget) -> dict:
    """load.MODELS at load.CLIENTS through the daemon and in each peer's process."""
    suite = [by_name.get(name) or models.BUILDERS[name]() for name in load.MODELS]
    return load.measure(server.address, peers, suite, load.CLIENTS, budget.load_s)


def _load_section(results: dict, directory: pathlib.Path, budget: Budget) -> None:
    _step("starting the peers and freezing the models")
    server = ServeProcess(directory)
    try:
        with PeerProcesses(directory, load.PEERS) as peers:
            server.warm_up(models.tiny_add())
            _step("throughput under load")
            results["load"] = _load(server, peers, {}, budget)
    finally:
        server.stop()


def _measure_with_peers(results: dict, suite: list[models.Model], peers: PeerProcesses, directory: pathlib.Path,
                        budget: Budget) -> None:
    """Every measurement from compile latency to the profiles, while the peer processes run (idle but for
    their turns)."""
    by_name = {m.name: m for m in suite}
    redis_server = RedisServer(directory)
    try:
        _step("compile latency")
        results["compile"] = compile_latency.measure(suite, peers, directory, redis_server, budget.compile_rounds,
                                                     budget.l1_repeats)
        _step("compile by digest")
        results["compile_by_digest"] = _compile_by_digest(directory, redis_server, budget)
        server = ServeProcess(directory, redis_env(redis_server))
        try:
            server.warm_up(models.tiny_add())
            with server.client() as client:
                _step("execute latency")
                results["execute"] = execute_latency.measure(client, peers, suite, budget.execute_s)
                _step("tiny round trip")
                results["tiny"] = transport.tiny_round_trip(client, peers, budget.tiny_s)
                _step("raw gRPC handlers that work")
                with RawGrpc() as raw:
                    results["handler_floor"] = transport.handler_floor(raw, budget.tiny_s)
                _step("throughput under load")
                results["load"] = _load(server, peers, by_name, budget)
                peers.stop()  # the peers' last use: what follows measures the daemon alone
                _step("tensor transfer")
                _transport(results, server, client, directory, budget)
                _step("throughput")
                small = by_name.get(THROUGHPUT_MODEL) or models.BUILDERS[THROUGHPUT_MODEL]()
                results["throughput"] = {"model": small.name, "by_clients": throughput.measure(
                    server.address, small, list(budget.concurrencies), budget.throughput_s)}
                _step("training step")
                results["training"] = training.measure(client, list(training.OPTIMIZERS), budget.training_s)
                _step("profiles")
                results["profiles"] = _profiles(server, client, by_name, directory, redis_server, budget)
        finally:
            server.stop()
    finally:
        redis_server.stop()


def run(mode: str, names: list[str], out_dir: pathlib.Path) -> dict:
    budget = MODES[mode]
    directory = pathlib.Path(tempfile.mkdtemp(prefix="xlacs-bench-"))
    print(f"logs and profiles in {directory}", flush=True)
    results = {"mode": mode, "budget": dataclasses.asdict(budget), "machine": machine.describe(ROOT),
               "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    _step("starting the peers and freezing the models")
    with PeerProcesses(directory) as peers:
        suite = models.build(names)
        results["models"] = {m.name: {"nodes": models.node_count(m.frozen), "graph_bytes": len(m.frozen.graph_def),
                                      "inputs": [list(a.shape) for a in m.inputs], "small": m.small}
                             for m in suite}
        _measure_with_peers(results, suite, peers, directory, budget)
    _step("tensor transfer, glibc heap only")
    tuned = ServeProcess(directory, transport.HEAP_ONLY_ENV)
    try:
        with tuned.client() as client, transport.heap_only():
            results["transfer_heap_only"] = _transfer(client, transport.HEAP_ONLY_ENV, [64], budget.transfer_s)
    finally:
        tuned.stop()
    _step("scaling")
    results["scaling"] = scaling.measure(directory, list(budget.chain_layers), list(budget.weight_mb))
    _step("dynamic batching")
    results["batching"] = batching.measure(directory, budget.batching_s, rounds=2)
    _step("TF Serving's Predict beside ModelInfer")
    results["tfserving"] = tfserving.measure(directory, budget.tfserving_requests, rounds=2)
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    _write(results, out_dir)
    return results


def run_section(section: str, mode: str, out_dir: pathlib.Path) -> dict:
    """Only one section, measured now, into the results already in `out_dir`: the other sections keep their
    figures, and the report says when the compile-by-digest section was measured."""
    results = json.loads((out_dir / "benchmarks.json").read_text())
    directory = pathlib.Path(tempfile.mkdtemp(prefix="xlacs-bench-"))
    print(f"logs in {directory}", flush=True)
    if section == "transport":
        _transport_section(results, directory, MODES[mode])
    elif section == "training":
        _training_section(results, directory, MODES[mode])
    elif section == "batching":
        _step("dynamic batching")
        results["batching"] = batching.measure(directory, MODES[mode].batching_s, rounds=2)
    elif section == "load":
        _load_section(results, directory, MODES[mode])
    elif section == "tfserving":
        _step("TF Serving's Predict beside ModelInfer")
        results["tfserving"] = tfserving.measure(directory, MODES[mode].tfserving_requests, rounds=2)
    else:
        redis_server = RedisServer(directory)
        try:
            _step("compile by digest")
            results["compile_by_digest"] = _compile_by_digest(directory, redis_server, MODES[mode])
        finally:
            redis_server.stop()
    _write(results, out_dir)
    return results


def _write(results: dict, out_dir: pathlib.Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "benchmarks.json").write_text(json.dumps(results, indent=1))
    (out_dir / "benchmarks.md").write_text(report.render(results))
    _step(f"wrote {out_dir / 'benchmarks.md'} and {out_dir / 'benchmarks.json'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short budgets, no 512 MB transfer: a few minutes")
    parser.add_argument("--models", default=",".join(models.BUILDERS),
                        help=f"comma-separated subset of {', '.join(models.BUILDERS)}")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "docs", help="where the .md and .json go")
    parser.add_argument("--only", choices=["compile_by_digest", "transport", "training", "batching", "tfserving",
                                           "load"],
                        help="measure this section alone and update it in --out's files (the rest keep their figures)")
    args = parser.parse_args()
    if args.only:
        run_section(args.only, "quick" if args.quick else "full", args.out)
        return
    names = [n for n in args.models.split(",") if n]
    unknown = sorted(set(names) - set(models.BUILDERS))
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {', '.join(models.BUILDERS)}")
    run("quick" if args.quick else "full", names, args.out)


if __name__ == "__main__":
    main()
