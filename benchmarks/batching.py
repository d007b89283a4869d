"""Dynamic batching (issue 19, docs/batching.md): MobileNetV2 served from a model repository twice, the same frozen
graph with and without dynamic_batching, under 16 concurrent clients each sending one image at a time with NVIDIA's
tritonclient over HTTP (in its own process and venv, .venv-tritonclient). The two models are measured in alternating
rounds in one run, so that the machine's load weighs on both alike; the goal is the ratio of their throughputs.
Beside it, one client sends the model without the batcher requests of 1, 2, 4 and 8 images in turns (the batch
sweep): the time per image at each batch size bounds what any batcher can gain on this machine.

    .venv/bin/python -m benchmarks.batching [--seconds 10] [--rounds 2]
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.processes import ServeProcess  # noqa: E402
from benchmarks.repositories import write_batching_pair  # noqa: E402
from tests.inference import tritonclient  # noqa: E402
from tests.models.keras_models import frozen_keras  # noqa: E402

CLIENTS = 16
MAX_BATCH_SIZE = 8
QUEUE_DELAY_US = 2000  # a lone request waits 2 ms for company; under load batches fill while one runs
PLAIN, BATCHED = "mobilenet_v2", "mobilenet_v2_batched"
READY_TIMEOUT_S = 1800  # two models' four batch buckets compile at load on a loaded 2-core machine

LOAD = """
import threading, time
import numpy as np
import tritonclient.http as http
image = np.random.default_rng(0).uniform(-1, 1, (1, 224, 224, 3)).astype(np.float32)
latencies, errors, stop = [], [], time.monotonic() + args["seconds"]
def client_loop():
    client = http.InferenceServerClient(args["url"], network_timeout=600)
    given = http.InferInput(args["input"], list(image.shape), "FP32")
    given.set_data_from_numpy(image, binary_data=True)
    while time.monotonic() < stop:
        start = time.perf_counter()
        try:
            client.infer(args["model"], [given])
        except Exception as e:
            errors.append(str(e))
            continue
        latencies.append(time.perf_counter() - start)
threads = [threading.Thread(target=client_loop) for _ in range(args["clients"])]
began = time.perf_counter()
for t in threads:
    t.start()
for t in threads:
    t.join()
reply(arrays={"latencies": np.array(latencies)}, result={"seconds": time.perf_counter() - began, "errors": errors[:3],
                                                          "failed": len(errors)})
"""


SWEEP = """
import time
import numpy as np
import tritonclient.http as http
client = http.InferenceServerClient(args["url"], network_timeout=600)
rng = np.random.default_rng(0)
latencies = {str(size): [] for size in args["sizes"]}
for _ in range(args["turns"]):
    for size in args["sizes"]:
        batch = rng.uniform(-1, 1, (size, 224, 224, 3)).astype(np.float32)
        given = http.InferInput(args["input"], list(batch.shape), "FP32")
        given.set_data_from_numpy(batch, binary_data=True)
        stop = time.monotonic() + args["seconds"]
        while time.monotonic() < stop:
            start = time.perf_counter()
            client.infer(args["model"], [given])
            latencies[str(size)].append(time.perf_counter() - start)
reply(arrays={size: np.array(times) for size, times in latencies.items()})
"""
SWEEP_SIZES = (1, 2, 4, 8)
SWEEP_TURNS = 4


def write_repository(repo: pathlib.Path) -> str:
    """The two models (one graph, one config without and one with dynamic_batching); the input's name."""
    frozen, _ = frozen_keras("MobileNetV2", (None, 224, 224, 3))
    (feed,), (fetch,) = list(frozen.feeds), frozen.fetches
    return write_batching_pair(repo, frozen.graph_def, feed, fetch, (PLAIN, BATCHED), MAX_BATCH_SIZE, QUEUE_DELAY_US)


def wait_ready(http_address: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while httpx.get(f"http://{http_address}/v2/health/ready", timeout=30).status_code != 200:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the repository did not load within {READY_TIMEOUT_S} s")
        time.sleep(1)


def measure(directory: pathlib.Path, seconds: float, rounds: int) -> dict:
    """Throughput (requests/s) and p50/p99 latency (ms) of each model over `rounds` alternating rounds, the
    batched model's throughput over the plain one's, and the load average around the run."""
    repo = directory / "models"
    input_name = write_repository(repo)
    server = ServeProcess(directory, {"XLACS_MODEL_REPOSITORY": str(repo)})
    try:
        http_address = f"127.0.0.1:{server.http_port}"
        wait_ready(http_address)
        load_before = os.getloadavg()
        runs = {PLAIN: [], BATCHED: []}
        for i in range(rounds):
            for model in (PLAIN, BATCHED) if i % 2 == 0 else (BATCHED, PLAIN):
                arrays, result = tritonclient.run(LOAD, directory / f"load-{model}-{i}", url=http_address,
                                                  model=model, input=input_name, clients=CLIENTS, seconds=seconds)
                if result["failed"]:
                    raise RuntimeError(f"{result['failed']} requests to {model} failed: {result['errors']}")
                runs[model].append((arrays["latencies"], result["seconds"]))
        sweep = batch_sweep(directory, http_address, input_name, seconds * rounds / (SWEEP_TURNS * len(SWEEP_SIZES)))
    finally:
        server.stop()
    figures = {}
    for model, measured in runs.items():
        latencies = np.concatenate([lat for lat, _ in measured])
        figures[model] = {"requests_per_s": len(latencies) / sum(s for _, s in measured),
                          "p50_ms": float(np.percentile(latencies, 50) * 1e3),
                          "p99_ms": float(np.percentile(latencies, 99) * 1e3), "requests": int(len(latencies))}
    return {"clients": CLIENTS, "max_batch_size": MAX_BATCH_SIZE, "max_queue_delay_us": QUEUE_DELAY_US,
            "seconds": seconds, "rounds": rounds, "without": figures[PLAIN], "with": figures[BATCHED],
            "throughput_ratio": figures[BATCHED]["requests_per_s"] / figures[PLAIN]["requests_per_s"],
            "sweep": sweep, "load_average": [load_before, os.getloadavg()]}


def batch_sweep(directory: pathlib.Path, http_address: str, input_name: str, seconds: float) -> dict:
    """The model without the batcher called by one client with batches of each of SWEEP_SIZES, in turns of
    `seconds` per size: p50 per request and per image (ms) by batch size, and the best size's images per second over
    a batch of one's (the most a batcher could gain if merging cost nothing)."""
    arrays, _ = tritonclient.run(SWEEP, directory / "sweep", url=http_address, model=PLAIN, input=input_name,
                                 sizes=list(SWEEP_SIZES), turns=SWEEP_TURNS, seconds=seconds)
    rows = {size: {"p50_ms": float(np.percentile(arrays[str(size)], 50) * 1e3), "requests": len(arrays[str(size)])}
            for size in SWEEP_SIZES}
    for size, row in rows.items():
        row["per_image_ms"] = row["p50_ms"] / size
    best = min(rows, key=lambda size: rows[size]["per_image_ms"])
    return {"sizes": {str(size): row for size, row in rows.items()}, "best_size": best,
            "ceiling": rows[1]["per_image_ms"] / rows[best]["per_image_ms"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="the length of one round of one model")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    directory = pathlib.Path(tempfile.mkdtemp(prefix="xlacs-bench-batching-"))
    print(json.dumps(measure(directory, args.seconds, args.rounds), indent=1))


if __name__ == "__main__":
    main()
