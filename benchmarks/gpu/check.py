"""`scripts/gpu-check FOLDER` on the GPU machine: the checks and measurements of issue 36, in one run of at most
`--budget-s` seconds, from the folder `scripts/gpu-check --prepare` made. Writes `gpu-report.json` to `--out` after
every section, so that a run cut short keeps what it measured; report.py renders docs/gpu.md from it.

Sections, in order (a section that would not finish in the time left is skipped, and says so):
- machine: the GPU, its driver, jax, jaxlib and the CUDA plugin;
- graphs: a daemon on gpu:0 compiles every graph at each of its batch sizes (cold compile time) and runs the first
  against TensorFlow's CPU outputs; and the SavedModel at two batch sizes (two shape buckets);
- speed: Execute through the daemon against the same program in this process (the floor: xlacs's compile of the
  graph, run without the RPC, from host arrays and from arrays already on the GPU), interleaved;
- torch: PyTorch eager on torchvision's MobileNetV2 and ResNet50 (torch_peer.py, its own process);
- batching: MobileNetV2 from a model repository, 16 concurrent clients (the Open Inference Protocol over gRPC),
  with and without dynamic_batching;
- device_memory: a daemon with a device budget under ResNet50's weights refuses it, naming the setting, and its
  dashboard shows the device's memory;
- options: XLA:GPU options (autotuning level, command buffers, the quick options of tiered compilation), compile
  time and run time of each;
- torch_compile: torch.compile of the same models, while time is left.

`--platform cpu` runs the same checks on the CPU (the suite's smoke test of this script)."""
from __future__ import annotations

import os

# This process, the daemons and PyTorch share one GPU: none takes 75% of its memory at start, as JAX would.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import platform as host  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import grpc  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.gpu import load  # noqa: E402
from benchmarks.gpu.manifest import GraphEntry, Manifest, saved_model_input  # noqa: E402
from benchmarks.peers import largest_error  # noqa: E402
from benchmarks.peers.files import write_graph_files  # noqa: E402
from benchmarks.peers.xlacs_program import build_with  # noqa: E402
from benchmarks.processes import ServeProcess  # noqa: E402
from benchmarks.repositories import write_batching_pair  # noqa: E402
from benchmarks import timing  # noqa: E402
from xlacs import SharedMemory  # noqa: E402
from xlacs_server.compile.compiler import quick_options  # noqa: E402
from xlacs_server.config import Settings  # noqa: E402

# XLA:GPU computed the graphs' float32 convolutions and dots in float32, not TF32: the first H200 run's largest
# difference from TensorFlow's CPU outputs was 3.2e-6 of an output's scale (docs/gpu.md). 1e-4 leaves 30x for
# summation order, and fails a program that rounds to TF32 (about 1e-3 of the scale per layer).
TOLERANCE = 1e-4
SPEED_GRAPHS = ("MobileNetV2", "ResNet50", "EfficientNetB0", "BertEncoder")
CLIENTS, MAX_BATCH, QUEUE_DELAY_US = 16, 16, 2000
OPTION_SETS = {"default": (), "autotune_level_0": ("xla_gpu_autotune_level=0",),
               "no_command_buffers": ("xla_gpu_enable_command_buffer=",),
               "quick": tuple(f"{k}={str(v).lower()}" for k, v in quick_options({}).items())}


class Run:
    def __init__(self, folder: pathlib.Path, out: pathlib.Path, work: pathlib.Path, platform: str, budget_s: float,
                 only: str = ""):
        self.folder, self.out, self.work, self.platform = folder, out, work, platform
        self.device = f"{platform}:0"
        self.work.mkdir(parents=True, exist_ok=True)
        self.deadline = time.monotonic() + budget_s
        self.manifest = Manifest.read(folder)
        if only:
            self.manifest.graphs = [g for g in self.manifest.graphs if g.name in only.split(",")]
        self.graphs = {g.name: g for g in self.manifest.graphs}
        self.report: dict = {"platform": platform, "budget_s": budget_s, "tolerance": TOLERANCE}
        self.executables: dict[tuple[str, int], object] = {}
        self.client = None  # the graphs section's, to the daemon that compiled `executables`

    @functools.cache
    def graph_def(self, name: str) -> bytes:
        """The graph `name` with its weights filled in, once per run (ResNet50's are 98 MB of SHAKE-256)."""
        return self.graphs[name].graph_def(self.folder)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def section(self, name: str, fn, needs_s: float) -> None:
        if self.left() < needs_s:
            self.report[name] = {"skipped": f"{self.left():.0f} s left, the section needs about {needs_s:.0f} s"}
        else:
            start = time.monotonic()
            try:
                self.report[name] = fn()
            except Exception:  # noqa: BLE001 - a section that fails is reported; the next ones still run
                self.report[name] = {"error": traceback.format_exc()[-3000:]}
            self.report.setdefault("seconds", {})[name] = round(time.monotonic() - start, 1)
        (self.out / "gpu-report.json").write_text(json.dumps(self.report, indent=1, default=str))
        print(f"[{name}] {json.dumps(self.report[name], default=str)[:1500]}", flush=True)

    def serve(self, env: dict | None = None) -> ServeProcess:
        return ServeProcess(self.work, {"XLACS_DEVICES": self.device, "XLACS_CACHE_DIR": str(self.work / "cache"),
                                        "XLACS_REQUIRE_GPU": "1" if self.platform == "gpu" else "0", **(env or {})})

    # -- sections ------------------------------------------------------------------------------------------------
    def machine(self) -> dict:
        import importlib.metadata

        import jax
        found = {"python": host.python_version(), "cpus": os.cpu_count(), "jax": jax.__version__,
                 "devices": [f"{d.platform}:{d.id} {d.device_kind}" for d in jax.devices(self.platform)]}
        for name in ("jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt", "jax-cuda12-plugin"):
            try:
                found[name] = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                pass
        if self.platform == "gpu":
            found["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=30).stdout.strip()
        return found

    def graphs_section(self, daemon: ServeProcess) -> dict:
        """The daemon's client stays open for the speed section, which runs the executables compiled here."""
        rows = {}
        client = self.client = daemon.client()
        for entry in self.manifest.graphs:
            graph_def = self.graph_def(entry.name)
            for batch in entry.batches:
                rows[f"{entry.name}/b{batch}"] = row_or_error(lambda: self.compile_and_check(client, entry, graph_def,
                                                                                             batch))
        rows["SavedModel"] = row_or_error(lambda: self.saved_model(client))
        return rows

    def compile_and_check(self, client, entry: GraphEntry, graph_def: bytes, batch: int) -> dict:
        """A cold compile through the daemon; at the first batch size, the outputs against TensorFlow's."""
        start = time.perf_counter()
        executable = client.compile(graph_def, entry.feeds_at(batch), entry.fetches, device=self.device,
                                    name=f"{entry.name}-b{batch}", wait_optimized=True)
        row = {"compile_ms": (time.perf_counter() - start) * 1e3, "cache": executable.cache,
               "stage_ms": {k: round(v, 1) for k, v in executable.stage_ms.items()}}
        self.executables[entry.name, batch] = executable
        if batch == entry.batches[0]:
            row["error"] = largest_error(executable(*entry.inputs(batch)), entry.expected(self.folder))
            row["matches"] = row["error"] <= TOLERANCE
        return row

    def saved_model(self, client) -> dict:
        start = time.perf_counter()
        executable = client.compile_saved_model(self.folder / "saved_model", device=self.device)
        row = {"compile_ms": (time.perf_counter() - start) * 1e3, "batches": {}}
        with np.load(self.folder / "expected" / "SavedModel.npz", allow_pickle=False) as saved:
            for batch in self.manifest.saved_model_batches:
                (name,) = executable.inputs
                outputs = executable(**{name: saved_model_input(batch)})
                expected = [saved[f"{batch}/{output}"] for output in outputs]
                error = largest_error(list(outputs.values()), expected)
                row["batches"][str(batch)] = {"error": error, "matches": error <= TOLERANCE}
        return row

    def speed(self, seconds: float = 0.6, rounds: int = 3) -> dict:
        import jax
        gpu = jax.devices(self.platform)[0]
        rows = {}
        for name in [n for n in SPEED_GRAPHS if n in self.graphs]:
            entry = self.graphs[name]
            for batch in entry.batches:
                if self.left() < 60:
                    rows[f"{name}/b{batch}"] = {"skipped": "out of time"}
                    continue
                rows[f"{name}/b{batch}"] = row_or_error(lambda: self.speed_of(entry, batch, gpu, seconds, rounds))
        return rows

    def speed_of(self, entry: GraphEntry, batch: int, gpu, seconds: float, rounds: int) -> dict:
        inputs = entry.inputs(batch)
        files = write_graph_files(self.work / "graphs" / f"{entry.name}-b{batch}", self.graph_def(entry.name),
                                  entry.feeds_at(batch), entry.fetches, inputs)
        start = time.perf_counter()
        floor = build_with(files, Settings(cache_dir="", devices=(self.device,)))
        floor_compile_ms = (time.perf_counter() - start) * 1e3
        on_device = [jax_put(a, gpu) for a in inputs]
        executable = self.executables.get((entry.name, batch))
        if executable is None:
            return {"skipped": "the daemon did not compile it (graphs)"}
        with SharedMemory(self.client, sum(a.nbytes + 4096 for a in inputs)) as region:
            shared = [region.put(a) for a in inputs]
            calls = {"daemon": lambda: executable(*inputs), "daemon_shared_memory": lambda: executable(*shared),
                     "in_process": lambda: floor(*inputs), "in_process_device_inputs": lambda: floor(*on_device)}
            row = {f"{name}_p50_ms": samples.p50 for name, samples in
                   timing.interleaved(calls, seconds * rounds, rounds, min_calls=3 * rounds).items()}
        row["daemon_vs_in_process"] = row["daemon_p50_ms"] / row["in_process_p50_ms"]
        row["shared_memory_vs_in_process"] = row["daemon_shared_memory_p50_ms"] / row["in_process_p50_ms"]
        row["in_process_compile_ms"] = floor_compile_ms
        return row

    def torch(self, variants: str, deadline_s: float) -> dict:
        out = self.work / f"torch-{variants.replace(',', '-')}.json"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PYTHONPATH"] = str(pathlib.Path(__file__).resolve().parents[2])
        process = subprocess.Popen([sys.executable, "-m", "benchmarks.gpu.torch_peer", "--out", str(out),
                                    "--variants", variants,
                                    "--deadline", str(max(deadline_s - 60, 0))], env=env)
        try:
            process.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return {"exit": process.returncode, **(json.loads(out.read_text()) if out.exists() else {})}

    def batching(self, seconds: float = 6.0, rounds: int = 2) -> dict:
        entry = self.graphs["MobileNetV2"]
        repository = self.work / "models"
        (feed,), (fetch,) = list(entry.feeds), entry.fetches
        input_name = write_batching_pair(repository, self.graph_def(entry.name), feed, fetch, ("plain", "batched"),
                                         MAX_BATCH, QUEUE_DELAY_US)
        start = time.perf_counter()
        daemon = self.serve({"XLACS_MODEL_REPOSITORY": str(repository)})
        runs = {"plain": [], "batched": []}
        try:
            load.wait_ready(daemon.address, self.deadline - 30)
            figures = {"clients": CLIENTS, "client_processes": CLIENTS // load.THREADS_PER_PROCESS,
                       "max_batch_size": MAX_BATCH, "max_queue_delay_us": QUEUE_DELAY_US,
                       "load_s": time.perf_counter() - start}
            image = entry.inputs(1)[0]
            with load.pool_for(CLIENTS) as pool:
                for i in range(rounds):
                    for model in ("plain", "batched") if i % 2 == 0 else ("batched", "plain"):
                        runs[model].append(load.load(daemon.address, model, input_name, image, CLIENTS, seconds,
                                                     pool))
        finally:
            figures_exit = daemon.stop()
        for model, measured in runs.items():
            figures[model] = {"requests_per_s": float(np.mean([m["requests_per_s"] for m in measured])),
                              "p50_ms": float(np.median([m["p50_ms"] for m in measured])),
                              "p99_ms": float(max(m["p99_ms"] for m in measured)),
                              "requests": sum(m["requests"] for m in measured),
                              "failed": sum(m["failed"] for m in measured)}
        figures["throughput_ratio"] = figures["batched"]["requests_per_s"] / figures["plain"]["requests_per_s"]
        figures["daemon_exit"] = figures_exit
        return figures

    def device_memory(self) -> dict:
        """A daemon with a device budget under ResNet50's weights refuses its compile with RESOURCE_EXHAUSTED naming
        max_device_bytes, serves MobileNetV2 within it, and its dashboard shows the device's budget and use."""
        import httpx

        resnet, mobilenet = self.graphs["ResNet50"], self.graphs["MobileNetV2"]
        budget = 64 << 20  # ResNet50's weights are 98 MB, MobileNetV2's 14 MB
        daemon = self.serve({"XLACS_MAX_DEVICE_BYTES": str(budget)})
        try:
            with daemon.client() as client:
                try:
                    client.compile(self.graph_def(resnet.name), resnet.feeds_at(1), resnet.fetches,
                                   device=self.device, wait_optimized=True)
                    refused = "compiled: not refused"
                except grpc.RpcError as e:  # the refusal is the result
                    refused = f"{e.code().name}: {e.details()}"[:600]
                executable = client.compile(self.graph_def(mobilenet.name), mobilenet.feeds_at(1),
                                            mobilenet.fetches, device=self.device, wait_optimized=True)
                error = largest_error(executable(*mobilenet.inputs(1)), mobilenet.expected(self.folder))
            overview = httpx.get(f"http://127.0.0.1:{daemon.http_port}/api/overview", timeout=30).json()
        finally:
            exit_code = daemon.stop()
        return {"budget": budget, "resnet50_refused": refused,
                "refused_names_setting": "RESOURCE_EXHAUSTED" in refused and "max_device_bytes" in refused,
                "mobilenet_v2_error": error, "mobilenet_v2_matches": error <= TOLERANCE,
                "devices": overview.get("devices"), "daemon_exit": exit_code}

    def options(self, seconds: float = 0.6) -> dict:
        import jax
        gpu = jax.devices(self.platform)[0]
        entry = self.graphs["MobileNetV2"]
        rows = {}
        for batch in entry.batches:
            inputs = entry.inputs(batch)
            files = write_graph_files(self.work / "graphs" / f"options-b{batch}", self.graph_def(entry.name),
                                      entry.feeds_at(batch), entry.fetches, inputs)
            on_device = [jax_put(a, gpu) for a in inputs]
            reference = None
            for name, items in OPTION_SETS.items():
                if self.left() < 40:
                    rows[f"b{batch}/{name}"] = {"skipped": "out of time"}
                    continue
                try:
                    start = time.perf_counter()
                    call = build_with(files, Settings(cache_dir="", devices=(self.device,), xla_options=items))
                    row = {"compile_ms": (time.perf_counter() - start) * 1e3}
                    outputs = call(*on_device)
                    reference = outputs if reference is None else reference
                    row["difference"] = largest_error(outputs, reference)
                    row["p50_ms"] = float(np.median(timing.calls_for(lambda: call(*on_device), seconds, 5)))
                except Exception as e:  # noqa: BLE001 - an option XLA refuses is a row that says why
                    row = {"error": f"{type(e).__name__}: {e}"[:800]}
                rows[f"b{batch}/{name}"] = row
        return rows


def row_or_error(fn) -> dict:
    """A row's figures, or the error that stopped it: one graph that fails does not hide the others."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {e}"[-1500:]}


def jax_put(array: np.ndarray, device):
    import jax
    return jax.block_until_ready(jax.device_put(array, device))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--out", default=os.environ.get("OUT", "gpu-check-out"))
    parser.add_argument("--work", default="/tmp/xlacs-gpu-check", help="the daemons' logs and cache, the graphs' files")
    parser.add_argument("--platform", default="gpu", choices=("gpu", "cpu"))
    parser.add_argument("--budget-s", type=float, default=450)
    parser.add_argument("--sections", default="graphs,speed,batching,options,device_memory,torch,torch_compile")
    parser.add_argument("--graphs", default="", help="only these graphs (the CPU smoke test's small ones)")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run = Run(pathlib.Path(args.folder), out, pathlib.Path(args.work), args.platform, args.budget_s, args.graphs)
    wanted = args.sections.split(",")
    run.section("machine", run.machine, 0)
    if "graphs" in wanted:
        daemon = run.serve()
        try:
            run.section("graphs", lambda: run.graphs_section(daemon), 60)
            if "speed" in wanted:
                run.section("speed", run.speed, 60)
        finally:
            if run.client is not None:
                run.client.close()
            run.report["daemon_exit"] = daemon.stop()
    if "batching" in wanted:
        run.section("batching", run.batching, 60)
    if "options" in wanted:
        run.section("options", run.options, 50)
    if "device_memory" in wanted:
        run.section("device_memory", run.device_memory, 40)
    if "torch" in wanted:
        run.section("torch", lambda: run.torch("eager,eager_tuned", 90), 40)
    if "torch_compile" in wanted:
        run.section("torch_compile", lambda: run.torch("compiled", run.left() - 5), 90)
    run.report["logs"] = {p.name: p.read_text()[-4000:] for p in sorted(run.work.glob("serve-*.log"))}
    (out / "gpu-report.json").write_text(json.dumps(run.report, indent=1, default=str))


if __name__ == "__main__":
    main()
