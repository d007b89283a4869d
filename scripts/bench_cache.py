"""Cache benchmark: MobileNetV2 and ResNet50, a cold compile vs an L1 hit vs an L2 (Redis) hit in a fresh
process. Starts its own redis-server on a free port; writes the figures into docs/cache.md, between its
benchmark markers.

    .venv/bin/python scripts/bench_cache.py [--rounds N]

Each round, per model: FLUSHALL; process A compiles (a miss in both tiers, then saved to Redis) and compiles
again (an L1 hit); a fresh process B compiles (an L2 hit: Redis GET, MAC check, zstd, PJRT deserialize).
Times are of CompilationService.compile in process, so they leave gRPC's transfer of the GraphDef out.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "cache.md"
BEGIN, END = "<!-- bench_cache.py: begin -->", "<!-- bench_cache.py: end -->"
MODELS = {"MobileNetV2": (1, 224, 224, 3), "ResNet50": (1, 224, 224, 3)}
SECRET = "bench-cache-secret-0123456789abcdef"
sys.path.insert(0, str(ROOT))  # for benchmarks/ and tests/


def worker(graph: pathlib.Path, meta: dict, redis_url: str, compiles: int) -> dict:
    """Runs in a fresh process: compiles `compiles` times; the timings and tiers of each, and an output digest."""
    import hashlib

    import numpy as np

    from xlacs import dtypes
    from xlacs_server.config import Settings
    from xlacs_server.pipeline.request import CompileSpec
    from xlacs_server.service import CompilationService
    service = CompilationService(Settings(redis_url=redis_url, cache_secret=SECRET, cache_dir=""))
    spec = CompileSpec(graph.read_bytes(), [(n, dtypes.parse(d), tuple(s)) for n, d, s in meta["feeds"]],
                       meta["fetches"], graph_name=meta["name"])
    runs = []
    for _ in range(compiles):
        start = time.perf_counter()
        result = service.compile(spec)
        runs.append({"ms": (time.perf_counter() - start) * 1e3, "cache": result.cache, "stage_ms": result.stage_ms})
    x = np.random.default_rng(0).uniform(-1, 1, meta["feeds"][0][2]).astype(np.float32)
    out = service.execute(result.loaded.id, {meta["feeds"][0][0]: x})[1][0]
    return {"runs": runs, "output_sha256": hashlib.sha256(out.tobytes()).hexdigest(),
            "entry_bytes": service.tiers[1].stats.bytes, "compiles": service.counters.compiles,
            "load_parts": load_parts(service, result.loaded.executable.key)}


def load_parts(service, key: str) -> dict:
    """The load stage taken apart, once more: Redis GET, MAC check and zstd, PJRT deserialization."""
    from xlacs_server.cache.entry import decode
    from xlacs_server.execute.program import Program
    tier, device = service.tiers[1], service.devices.resolve("").device  # L2, behind L1
    start = time.perf_counter()
    blob = tier.store.get(tier.stored_key(key))
    got = time.perf_counter()
    entry = decode(blob, key, tier.secret)
    decoded = time.perf_counter()
    Program.deserialize(entry.executable, device)
    done = time.perf_counter()
    return {"get": (got - start) * 1e3, "decode": (decoded - got) * 1e3, "deserialize": (done - decoded) * 1e3}


def in_fresh_process(graph: pathlib.Path, meta: dict, redis_url: str, compiles: int) -> dict:
    result = subprocess.run([sys.executable, __file__, "--worker", str(graph), json.dumps(meta), redis_url,
                             str(compiles)], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(result.stdout.strip().splitlines()[-1])


def freeze_models(directory: pathlib.Path) -> dict[str, tuple[pathlib.Path, dict]]:
    from tests.models.keras_models import frozen_keras
    graphs = {}
    for name, shape in MODELS.items():
        frozen, _ = frozen_keras(name, shape)
        path = directory / f"{name}.pb"
        path.write_bytes(frozen.graph_def)
        graphs[name] = path, {"name": name, "fetches": list(frozen.fetches),
                              "feeds": [[n, "float32", list(s)] for n, (_, s) in frozen.feeds.items()]}
    return graphs


def measure(rounds: int) -> tuple[dict, dict]:
    import redis

    from benchmarks.processes import RedisServer
    with tempfile.TemporaryDirectory() as tmp:
        directory = pathlib.Path(tmp)
        graphs = freeze_models(directory)
        redis_server = RedisServer(directory)
        url = redis_server.url
        try:
            figures = {}
            for name, (graph, meta) in graphs.items():
                samples = {"cold": [], "l1": [], "l2": [], "l2_load": [], "get": [], "decode": [], "deserialize": []}
                for _ in range(rounds):
                    redis.Redis.from_url(url).flushall()
                    cold = in_fresh_process(graph, meta, url, 2)
                    warm = in_fresh_process(graph, meta, url, 1)
                    (first, again), (loaded,) = cold["runs"], warm["runs"]
                    assert [first["cache"], again["cache"], loaded["cache"]] == ["miss", "l1", "l2"], (cold, warm)
                    assert warm["compiles"] == 0 and warm["output_sha256"] == cold["output_sha256"]
                    samples["cold"].append(first["ms"])
                    samples["l1"].append(again["ms"])
                    samples["l2"].append(loaded["ms"])
                    samples["l2_load"].append(loaded["stage_ms"]["load"])
                    for part, ms in warm["load_parts"].items():
                        samples[part].append(ms)
                figures[name] = {k: statistics.median(v) for k, v in samples.items()}
                figures[name]["entry_bytes"] = cold["entry_bytes"]
                figures[name]["graph_bytes"] = graph.stat().st_size
                figures[name]["l2_stages"] = loaded["stage_ms"]
            info = redis.Redis.from_url(url).info("server")
            return figures, {"redis": info["redis_version"]}
        finally:
            redis_server.kill()


def report(figures: dict, env: dict, rounds: int) -> str:
    import jax
    lines = [
        f"Measured by `scripts/bench_cache.py` on {platform.node()} ({platform.machine()}, {jax.device_count()} "
        f"XLA:CPU device, jax {jax.__version__}, Redis {env['redis']} on loopback); medians of {rounds} rounds. "
        "A Compile on a hit still parses the GraphDef, computes the key and binds the weights (the same for "
        "an L1 hit); the `load` stage is what L2 adds: GET, MAC check, zstd, PJRT deserialize.", "",
        "| Model | GraphDef | entry in Redis | cold compile | L1 hit | L2 hit (fresh process) | of which load "
        "| L2 hit / cold | load / cold |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, f in figures.items():
        lines.append(f"| {name} | {f['graph_bytes'] / 1e6:.1f} MB | {f['entry_bytes'] / 1e6:.2f} MB | "
                     f"{f['cold']:.0f} ms | {f['l1']:.0f} ms | {f['l2']:.0f} ms | {f['l2_load']:.1f} ms | "
                     f"{100 * f['l2'] / f['cold']:.1f} % | {100 * f['l2_load'] / f['cold']:.2f} % |")
    lines += ["", "The L2 hit's stages (last round) and its load taken apart (medians):", "",
              "| Model | stages of the L2 hit | Redis GET | MAC check + zstd | PJRT deserialize |",
              "| --- | --- | ---: | ---: | ---: |"]
    for name, f in figures.items():
        stages = ", ".join(f"{k} {v:.0f}" for k, v in f["l2_stages"].items())
        lines.append(f"| {name} | {stages} | {f['get']:.2f} ms | {f['decode']:.2f} ms | {f['deserialize']:.0f} ms |")
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        graph, meta, url, compiles = sys.argv[2:]
        print(json.dumps(worker(pathlib.Path(graph), json.loads(meta), url, int(compiles))))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    figures, env = measure(args.rounds)
    text = report(figures, env, args.rounds)
    doc = DOC.read_text()
    head, _, rest = doc.partition(BEGIN)
    DOC.write_text(f"{head}{BEGIN}\n{text}{END}{rest.partition(END)[2]}")
    print(text)


if __name__ == "__main__":
    main()
