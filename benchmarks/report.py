"""docs/benchmarks.md from one run's results: the goals as measured ratios with pass/fail, then one table per
measurement, what limits each missed goal (from the run's own profiles), and the machine."""
from __future__ import annotations

from benchmarks import goals, load
from benchmarks.peers import (BUILDERS, IN_PROCESS, IN_PROCESS_EMBEDDED, ONLY_FOR, PEERS, RUNTIMES, TF_GRAPH, TF_XLA,
                              XLACS)
from benchmarks.machine import as_markdown
from benchmarks.models import MB
from benchmarks.transport import RAW, handler_ratios
from xlacs import streaming


def _ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _bytes(n: float) -> str:
    return f"{n / MB:.1f} MB" if n >= MB else f"{n / 1024:.1f} kB" if n >= 1024 else f"{n:.0f} B"


def _ratio(a: float | None, b: float | None) -> str:
    return "—" if a is None or b is None or not b else f"{a / b:.2f}×"


def _table(header: list[str], rows: list[list[str]], align_first: int = 1) -> list[str]:
    return ["| " + " | ".join(header) + " |",
            "| " + " | ".join(["---"] * align_first + ["---:"] * (len(header) - align_first)) + " |",
            *["| " + " | ".join(row) + " |" for row in rows], ""]


def _goals(results: dict) -> list[str]:
    rows = [[g.goal, g.measured, g.ratio_text, g.verdict] for g in goals.evaluate(results)]
    return ["## Goals", "", *_table(["Goal", "Measured", "Ratio (target)", "Result"], rows)]


def _compile(results: dict) -> list[str]:
    rows = []
    for name, row in results["compile"].items():
        med, info = row["median_ms"], results["models"][name]
        cold, tf_xla = med.get("cold_first_result_ms"), row["peer_first_call_median_ms"].get(TF_XLA)
        rows.append([name, str(info["nodes"]), f"{info['graph_bytes'] / MB:.1f}", _ms(med.get("cold_ms")),
                     row.get("cold_tier", ""), _ms(cold), _ms(med.get("cold_optimized_ms")),
                     _ms(med.get("l1_ms")), _ms(med.get("l2_ms")),
                     f"{100 * med['l2_ms'] / med['cold_ms']:.1f}%", _ms(tf_xla), _ratio(cold, tf_xla)])
    stage_rows = [[name, tier, *(_ms(row.get(f"{tier}_stage_ms", {}).get(s)) for s in goals.STAGES)]
                  for name, row in results["compile"].items() for tier in ("cold", "l1", "l2")]
    rounds = results["budget"]["compile_rounds"]
    return ["## Compile latency (ms)", "",
            f"Medians of {rounds} round(s). Each round starts a fresh `xlacs serve` on an emptied Redis (its "
            "first Compile of a model is cold, the next ones L1 hits), then a second fresh `xlacs serve` on the "
            "same Redis (L2 hits), then builds every peer anew in its process (a new "
            "`tf.function(jit_compile=True)`, a new tf2jax + `jax.jit` function, a new OpenVINO compiled model, "
            "a new tf2onnx conversion and ONNX Runtime session, ...), so that each compiles again. Every process "
            "is warmed by a tiny compile first. Times are wall time at the caller; the xlacs times include "
            "sending the GraphDef over loopback. *Cold + first result* adds the first Execute, as a peer's first "
            "call includes its first run. A cold compile of a large program is tiered (docs/performance.md, Tiered "
            "compilation): it answers with the program the *answered with* column names, and *optimized in* is "
            "the time from its start until the optimized program replaced a quick one (the L2 hits load that).",
            "", *_table(["Model", "nodes", "GraphDef MB", "cold Compile", "answered with", "cold + first result",
                         "optimized in", "L1 hit", "L2 hit", "L2 / cold", "TF XLA first call",
                         "cold + first / TF XLA"], rows),
            "Server-side stages of the last round (ms; `load` is the Redis read and deserialization, `prepare` "
            "the run of the weight-only program when the weights are bound):", "",
            *_table(["Model", "tier", *goals.STAGES], stage_rows, align_first=2), *_first_calls(results)]


def _compile_by_digest(results: dict) -> list[str]:
    if "compile_by_digest" not in results:
        return []
    d = results["compile_by_digest"]
    med, cold = d["median"], d["median"]["cold"]["ms"]
    labels = {"cold": "cold compile (first client, uploads the graph)",
              "new_client": "repeat, by a new client reading the file", "same_client": "repeat, by the same client",
              "replica": "a fresh replica sharing the Redis, new client", "checkpoint": "second checkpoint"}
    rows = [[text, _ms(med[label]["ms"]), _ratio(med[label]["ms"], cold), _bytes(med[label]["sent_bytes"]),
             med[label]["cache"]] for label, text in labels.items()]
    checkpoint = d["rounds"][-1]["checkpoint"]
    skeleton = (f" and its skeleton, {d['changed_skeleton_bytes'] / MB:.2f} MB (TensorFlow wrote some node's "
                "attrs in another order)" if d["changed_skeleton_bytes"] else "")
    return ["## Compile by digest (ms)", "",
            f"{d['model']}'s frozen GraphDef ({d['graph_bytes'] / MB:.1f} MB: a {d['skeleton_bytes'] / MB:.2f} MB "
            f"skeleton and {d['cuts']} tensors) compiled from its file by `Client.compile`, client wall time; "
            f"medians of {len(d['rounds'])} round(s) ({d['started']} to {d['finished']}), {d['repeats']} repeats "
            "each. Each round starts an `xlacs serve` on an emptied Redis, compiles cold, then repeats with a "
            "new client (a fresh `Client`: it hashes the file, then compiles by digest) and with that same "
            "client again (it remembers the file's digest), then compiles a second checkpoint on that daemon, "
            "then compiles with a new client on a second fresh `xlacs serve` that shares the Redis. *Sent* is "
            "the request bytes the daemon received for the compile, every RPC (GetStats.received_bytes). A new "
            f"client's hash of the file alone takes {med['hash_ms']:.0f} ms (file in the page cache).", "",
            *_table(["Compile", "ms", "× cold", "sent", "tier"], rows),
            f"The second checkpoint retrains {', '.join(d['retrained'])}: {d['changed_tensor_bytes'] / MB:.2f} MB "
            f"of changed tensors{skeleton}. Its compile ran {checkpoint['compiles']} XLA compile(s); its output "
            f"differs from TensorFlow's by {checkpoint['max_relative_error_vs_tf']:.0e} of the output's scale.", ""]


def _first_calls(results: dict) -> list[str]:
    rows, failures = [], []
    for name, row in results["compile"].items():
        first = row["peer_first_call_median_ms"]
        rows.append([name, _ms(row["median_ms"].get("cold_first_result_ms")),
                     *(_ms(first[peer]) if peer in first else "failed" if peer in row["errors"] else "—"
                       for peer in BUILDERS)])
        failures += [f"- {name}, {peer}: {e}" for peer, e in row["errors"].items()]
    return ["### First call: build + first result (ms)", "",
            "Each peer's process is given the frozen GraphDef and builds from it what its user would (TF imports "
            "it, OpenVINO's TensorFlow frontend reads the file, ONNX Runtime runs tf2onnx's conversion, xlacs "
            "compiles it cold), then returns its first result; medians of the rounds.", "",
            *_table(["Model", "xlacs (cold + first result)", *BUILDERS], rows),
            *(["Peers that could not build a model:", "", *failures, ""] if failures else [])]


def _rewrites(row: dict) -> str:
    """The passes that changed the graph on its cold compile, with its node counts."""
    changed = [f"{name} {before}→{after}" for name, before, after in row["cold_passes"] if before != after]
    return ", ".join(changed) or "none"


def _execute(results: dict) -> list[str]:
    rows, ratio_rows, error_rows, failures = [], [], [], []
    for name, row in results["execute"].items():
        p = row["peers"]
        rows.append([name, *(f"{_ms(p[peer]['p50_ms'])} / {_ms(p[peer]['p99_ms'])}" if peer in p else
                             "failed" if peer in row["errors"] else "—" for peer in PEERS)])
        x = p[XLACS]["p50_ms"]
        best = goals.fastest(results, name, RUNTIMES)
        compiled = results["compile"][name]
        ratio_rows.append([name, *(_ratio(x, p[peer]["p50_ms"]) if peer in p else "—"
                                   for peer in (TF_GRAPH, TF_XLA, IN_PROCESS)),
                           "—" if best is None else f"{_ratio(x, best[1])} ({best[0]})",
                           _ratio(compiled["median_ms"].get("cold_first_result_ms"),
                                  compiled["peer_first_call_median_ms"].get(TF_XLA)), _rewrites(compiled)])
        errors = row["max_relative_error_vs_tf_graph"]
        error_rows.append([name, *(f"{errors[peer]:.0e}" if peer in errors else "—" for peer in PEERS)])
        failures += [f"- {name}, {peer}: {e}" for peer, e in row["errors"].items()]
    seconds = results["budget"]["execute_s"]
    return ["## Execute latency (ms, p50 / p99)", "",
            "Batch 1 (batch 8 for a model whose name ends in -b8), numpy in and numpy out for every peer. The peers "
            f"are timed interleaved, {seconds:g} s each "
            "per model in 5 turns taken in rotation, one peer running at a time, so that load from elsewhere "
            "lands on all of them; each round takes the peers in another order, so that what one leaves behind "
            "after its turn (threads that spin, caches) slows a different peer each round. xlacs is a separate `xlacs serve` process called over loopback gRPC from the "
            "benchmark's process; every other peer runs in a process of its own on the same GraphDef and input "
            "files and times its own calls. *In-process JAX* calls the very program xlacs compiled (same passes, "
            "lowering and PJRT options), so *xlacs / in-process JAX* is the service overhead; *xlacs, run local* (the small "
            "models) is the executable the daemon compiled, downloaded once into the benchmark's process "
            "(`Executable.local`) and called there; for the models of "
            f"{', '.join(ONLY_FOR[IN_PROCESS_EMBEDDED])}, *weights embedded* is the same graph compiled with "
            "`lift_threshold_bytes=0`, every weight a constant of the program. OpenVINO runs with f32 inference "
            "precision. Every peer keeps its engine's default threading, which uses the machine's cores: TensorFlow's "
            "intra- and inter-op pools and XLA:CPU's pool have a thread per core, OpenVINO's LATENCY hint runs one "
            "stream on the physical cores, ONNX Runtime's intra-op pool has a thread per physical core.", "",
            *_table(["Model", *PEERS], rows),
            *(["Peers that could not run a model:", "", *failures, ""] if failures else []),
            "Ratios of p50s (below 1 xlacs is faster), the cold compile against TF XLA's first call, and what "
            "xlacs chose for the graph: the passes that changed it on its cold compile, with the node counts "
            "(XLA flags will show here once the daemon reports them):", "",
            *_table(["Model", *(f"xlacs / {peer}" for peer in (TF_GRAPH, TF_XLA, IN_PROCESS)),
                     "xlacs / best of OpenVINO and ONNX Runtime", "cold + first / TF XLA first call",
                     "passes that changed the graph"], ratio_rows),
            "Largest difference from TF graph mode's outputs, relative to the output's scale:", "",
            *_table(["Model", *PEERS], error_rows)]


def _tiny(results: dict) -> list[str]:
    rows = [[path, f"{s['p50_ms'] * 1e3:.0f}", f"{s['p99_ms'] * 1e3:.0f}", str(s["n"])]
            for path, s in results["tiny"].items()]
    return ["## Tiny round trip (µs)", "",
            "One Add on two inputs of 4 float32, Execute over loopback gRPC, beside an empty unary RPC on the "
            "same channel (the standard health Check: what gRPC Python costs before xlacs does anything) and "
            "the same program called in-process (in the process of the in-process JAX peer)."
            + _measured_alone(results), "",
            *_table(["Path", "p50", "p99", "calls"], rows), *_handler_floor(results)]


def _handler_floor(results: dict) -> list[str]:
    floor = results.get("handler_floor")
    if not floor:
        return []
    ratios = handler_ratios(floor)
    rows = [[us, f"{s['p50_ms'] * 1e3:.0f}", f"{ratios[us]:.2f}×", str(s["n"])] for us, s in floor.items()]
    return ["", "What any gRPC Python service can spend per call against that goal: a raw server in its own process "
            "(`benchmarks/raw_grpc.py`, no protobuf, no xlacs) whose handler keeps the CPU busy for a while before "
            "it answers, called from this process, interleaved (p50 µs, and against the empty call):", "",
            *_table(["handler busy µs", "p50", "× empty call", "calls"], rows)]


def _measured_alone(results: dict) -> str:
    m = results.get("transport_measured")
    return "" if m is None else (
        f" This section and the tensor transfer were measured alone (`benchmarks.run --only transport`, {m['started']} "
        f"to {m['finished']}, load average {m['load_average']:.1f} at the end).")


def _transfer_table(transfer: dict) -> list[str]:
    rows = []
    for label, peers in transfer.items():
        x, raw = peers[XLACS], peers[RAW]
        rows.append([label, _ms(x["p50_ms"]), _ms(x["p99_ms"]), f"{x['gb_per_s']:.2f}", _ms(raw["p50_ms"]),
                     f"{raw['gb_per_s']:.2f}", _ratio(x["p50_ms"], raw["p50_ms"])])
    return _table(["Tensor", "xlacs p50 ms", "p99 ms", "xlacs GB/s", "raw gRPC p50 ms", "raw gRPC GB/s",
                   "xlacs / raw"], rows)


def _transfer(results: dict) -> list[str]:
    copies = results["copy_rates"]
    return ["## Tensor transfer", "",
            "One Execute moving a float32 tensor of the given size one way (the other way carries 4 bytes): "
            "the input case runs `x[:1]`, the output case broadcasts a scalar. Beside it, interleaved, gRPC "
            "Python moves the same number of bytes between two processes with no protobuf at all (a generic "
            "handler, `benchmarks/raw_grpc.py`): the floor of any gRPC Python service. GB/s = bytes / p50 time "
            "(decimal GB); the time is the whole call. The daemon's `max_input_bytes` is raised to 1 GiB for "
            f"the 512 MB input. The client sends calls that move {streaming.STREAM_BYTES // MB} MiB or more as an "
            "ExecuteStream, in pieces (docs/data_plane.md); *in and out* runs `x + 1`, and its GB/s counts both "
            "ways.", "",
            *_transfer_table(results["transfer"]), *_client_memory(results),
            f"One copy of {copies['bytes'] // MB} MB in this process runs at "
            f"{copies['fresh_pages_gb_per_s']:.2f} GB/s into fresh pages (`ndarray.tobytes()`: glibc maps every "
            f"allocation over 32 MB anew, and each page faults in on first touch) and at "
            f"{copies['mapped_pages_gb_per_s']:.2f} GB/s into pages already mapped (`np.copyto`).", "",
            "The same 64 MB calls with glibc's mmap threshold out of the way (`MALLOC_MMAP_MAX_=0`, "
            "`MALLOC_TRIM_THRESHOLD_` huge, in the server, the raw server and, through `mallopt`, the client), so "
            "that freed blocks are reused already mapped:", "", *_transfer_table(results["transfer_heap_only"])]


def _client_memory(results: dict) -> list[str]:
    m = results.get("client_memory")
    if m is None:
        return []
    return [f"The client's peak memory during one call moving {m['payload_bytes'] // MB} MB in and out (measured in a "
            "process of its own, `benchmarks/client_memory.py`: its resident set's peak above what it held with the "
            f"inputs made): {m['streamed_peak_bytes'] / MB:.0f} MiB streamed ({m['streamed_ratio']:.2f}× the payload), "
            f"{m['unary_peak_bytes'] / MB:.0f} MiB as a unary Execute ({m['unary_ratio']:.2f}×).", ""]


def _throughput(results: dict) -> list[str]:
    t = results["throughput"]
    rows = [[n, f"{s['requests_per_s']:.0f}", _ms(s["p50_ms"]), _ms(s["p99_ms"]), str(s["slowest_client_requests"])]
            for n, s in t["by_clients"].items()]
    return ["## Throughput", "",
            f"Model: {t['model']}. N clients, each on its own channel and thread in one process, call Execute "
            f"back to back for {results['budget']['throughput_s']:g} s. The server runs "
            "`max_concurrent_executes` = 4 calls at once and queues the rest (its queue is raised for this "
            "benchmark so that 64 clients wait rather than fail fast).", "",
            *_table(["clients", "requests/s", "p50 ms", "p99 ms", "calls of the slowest client"], rows)]


def _load(results: dict) -> list[str]:
    if not results.get("load"):
        return []
    runners = [XLACS, *load.PEERS]
    rows, errors = [], []
    for model, r in results["load"]["models"].items():
        for n, row in r["by_clients"].items():
            cells = [f"{row['runners'][p]['requests_per_s']:.1f} / {_ms(row['runners'][p]['p99_ms'])}"
                     if p in row["runners"] else "failed" for p in runners]
            rows.append([model, n, *cells, f"{row['xlacs_over_best']:.2f}× ({row['best_peer']})"
                         if row["best_peer"] else "—"])
        errors += [f"- {model}, {peer}: {error}" for peer, error in r["errors"].items()]
    return ["## Throughput under load (issue 35)", "",
            "N clients at once, each calling back to back: for xlacs, N clients of the daemon, each on its own "
            "channel and thread in the benchmark's process; for every other engine, N threads of the peer's own "
            "process sharing one engine (OpenVINO: an infer request per thread), as an application serving these "
            f"requests in process would. {results['load']['seconds']:g} s per runner and concurrency, in two "
            f"turns taken in reversed order, from {results['load']['started']}. Requests per second / p99 ms; the "
            "last column is xlacs' throughput over the best other engine's.", "",
            *_table(["Model", "clients", *runners, "xlacs / best"], rows, align_first=2),
            *([*errors, ""] if errors else [])]


def _training(results: dict) -> list[str]:
    t = results.get("training")
    if t is None:
        return []
    runners = ("xlacs", "TF graph mode", "TF XLA")
    rows = [[name, *[_ms(r[p]["p50_ms"]) for p in runners], *[_ms(r[p]["p99_ms"]) for p in runners],
             f"{r['xlacs_over_tf_graph']:.2f}×", f"{r['xlacs_over_tf_xla']:.2f}×", _bytes(r["state_bytes"])]
            for name, r in t["by_optimizer"].items()]
    alone = f" Measured alone (`benchmarks.run --only training`, {t['started']})." if "started" in t else ""
    return ["## Training step (ms)", "",
            f"{t['model']}: one Keras training step (forward, gradients, `optimizer.apply_gradients`) per call. "
            "xlacs runs the unfrozen graph on a variable state (docs/training.md): the batch goes, the loss comes "
            "back, the model and its optimizer slots stay on the daemon's device and are updated in place. TF graph "
            "mode is the tf.function, TF XLA the same with jit_compile=True, both in the benchmark's process; the "
            f"three interleaved. Load average {t['load_average']:.1f} at the end.{alone}", "",
            *_table(["optimizer", *[f"{p} p50" for p in runners], *[f"{p} p99" for p in runners],
                     "xlacs / TF graph", "xlacs / TF XLA", "state"], rows)]


def _batching(results: dict) -> list[str]:
    b = results.get("batching")
    if b is None:
        return []
    rows = [[label, f"{r['requests_per_s']:.1f}", _ms(r["p50_ms"]), _ms(r["p99_ms"]), str(r["requests"])]
            for label, r in (("without dynamic batching", b["without"]), ("with dynamic batching", b["with"]))]
    return ["## Dynamic batching (MobileNetV2 served, 16 clients)", "",
            f"MobileNetV2 from a model repository (docs/batching.md), max_batch_size {b['max_batch_size']}, the "
            f"same graph without and with `dynamic_batching {{ max_queue_delay_microseconds: "
            f"{b['max_queue_delay_us']} }}`; {b['clients']} clients (tritonclient over HTTP, one image a request, "
            f"in their own process), {b['rounds']} alternating rounds of {b['seconds']:g} s per model. Throughput "
            f"ratio {b['throughput_ratio']:.2f}×. Load average {b['load_average'][0][0]:.1f} before, "
            f"{b['load_average'][1][0]:.1f} after.", "",
            *_table(["", "requests/s", "p50 ms", "p99 ms", "requests"], rows), *_batch_sweep(b.get("sweep"))]


def _batch_sweep(sweep: dict | None) -> list[str]:
    if sweep is None:
        return []
    rows = [[size, _ms(r["p50_ms"]), _ms(r["per_image_ms"]), str(r["requests"])] for size, r in sweep["sizes"].items()]
    return ["", "The batch sweep: one client sends the model without the batcher requests of each batch size in turns "
            "(what each merged run costs, with nothing else running). A batcher can gain at most the ratio of the "
            f"time per image at batch 1 to the best size's: {sweep['ceiling']:.2f}× (batch {sweep['best_size']}).",
            "", *_table(["batch size", "p50 ms per request", "ms per image", "requests"], rows)]


def _span(values: list[float]) -> str:
    low, high = _ms(min(values)), _ms(max(values))
    return low if low == high else f"{low}-{high}"


def _tfserving(results: dict) -> list[str]:
    t = results.get("tfserving")
    if t is None:
        return []
    ways = (("in_process", "in the daemon's process (no transport)"),
            ("round_trip", "round trip over loopback, the official client"))
    apis = (("predict", "TF Serving's `PredictionServicer.Predict`"),
            ("model_infer", "the Open Inference Protocol's `InferenceServicer.ModelInfer`"))
    rows = [[f"{label}, {where}", *[_span(t[way][api][q]) for q in ("p50_ms", "p90_ms")],
             f"{t[way]['ratio']:.2f}×" if api == "predict" else ""]
            for way, where in ways for api, label in apis]
    return ["## TF Serving's Predict beside ModelInfer (ms)", "",
            f"The repository's small GraphDef model (4 floats in, 3 out, max_batch_size 8, no batcher), batch 1, "
            f"served by a daemon in the benchmark's process (`benchmarks/tfserving.py`, measured {t['started']}): "
            f"{t['requests']} sequential requests after {t['warm_up']} to warm up, per API, way and round; "
            f"{t['rounds']} rounds, each API first in every other one. The round trips are the official clients' in "
            "their venvs (tensorflow-serving-api's stubs with `tf.make_tensor_proto` in and `tf.make_ndarray` out; "
            "`tritonclient.grpc`). Per round figures (lowest-highest); the ratio is Predict's median over ModelInfer's "
            f"(the goal: at most 1.1×). Load average {t['load_average'][0][0]:.1f} before, "
            f"{t['load_average'][1][0]:.1f} after.", "",
            *_table(["path", "median", "90th percentile", "Predict / ModelInfer"], rows)]


def _scaling(results: dict) -> list[str]:
    rows = []
    for row in results["scaling"]["rows"]:
        cells = [row["graph"], str(row["nodes"]), f"{row['graph_bytes'] / MB:.1f}"]
        for label in ("lifted", "embedded"):
            r = row[label]
            cells += [_ms(r["compile_ms"]), f"{r['executable_bytes'] / MB:.2f}", f"{r['rss_growth_mib']:.0f}"]
        rows.append(cells)
    return ["## Cost growth", "",
            "Cold compiles on two fresh `xlacs serve` processes, one with weight lifting (the default: weights "
            "become parameters bound at Execute) and one with `lift_threshold_bytes=0` (every constant stays in "
            "the program). *Executable* is the serialized XLA executable; *RSS growth* is the server's resident "
            "memory after the compile and a first Execute, minus before.", "",
            *_table(["Graph", "nodes", "GraphDef MB", "lifted: compile ms", "executable MB", "RSS growth MiB",
                     "embedded: compile ms", "executable MB", "RSS growth MiB"], rows)]


def _profiles(results: dict) -> list[str]:
    lines = ["## Profiles", "",
             "Taken after the measurements: py-spy samples the `xlacs serve` process (the L2 hits: a fresh one "
             "on the same Redis, at 1000 Hz; the others: the measured daemon, at 200 Hz), only the thread "
             "holding the GIL (`--gil`), and cProfile the client thread; percentages are of the samples (server) "
             "and of the workload's wall time (client).", ""]
    for p in results.get("profiles", []):
        lines += [f"### {p['label']}", ""]
        if "tiers" in p:
            lines += ["Tiers that answered: " + ", ".join(f"{m} {t}" for m, t in p["tiers"].items()) + ".", ""]
        server = p["server"]
        if isinstance(server, str):
            lines += [f"Server: {server}", ""]
        else:
            lines += [f"Server, {server['samples']} samples holding the GIL:", "",
                      *_table(["own time", "%"], [[f"`{f}`", str(v)] for f, v in server["self_percent"]]),
                      *_table(["in the stack", "%"], [[f"`{f}`", str(v)] for f, v in server["inclusive_percent"]])]
        lines += ["Client (own time, % of the workload):", "",
                  *_table(["function", "%"], [[f"`{f}`", str(v)] for f, v in p["client_self_percent"]])]
    return lines


def _language_models(results: dict) -> list[str]:
    """What the language models are, and what ONNX Runtime's conversion needs for them, if the run has one."""
    if not set(goals.TRANSFORMER_MODELS) & set(results["compile"]):
        return []
    return ["The language models (issue 35, `benchmarks/language_models.py`) are Keras functional models fed int32 "
            "token ids drawn from their whole vocabulary. BertEncoder: token and position embeddings and their "
            "LayerNorm, then 4 post-LN layers (hidden 512, 8 heads, feed-forward 2048 with Keras' exact GELU), "
            "sequence 128, vocabulary 8,000, out its hidden states. GptDecoder: the same embeddings, 2 pre-LN "
            "layers of that width with causal self-attention, a final LayerNorm and an LM head, sequence 64, out "
            "the logits over 4,000 words. A name ending in -b8 is the same model at batch 8. TensorFlow computes "
            "the exact GELU as 0.5·x·erfc(-x/√2); tf2onnx 1.17 has no rule for Erfc and leaves it in the ONNX "
            "graph, which ONNX Runtime refuses (no such ONNX op), so the ONNX Runtime peer converts with the "
            "custom op handler tf2onnx's users write for it: Erfc(x) = 1 - Erf(x) (onnx/tensorflow-onnx issue "
            "2347).", ""]


def render(results: dict) -> str:
    models = ", ".join(results["compile"])
    lines = ["# Benchmarks: xlacs side by side with TensorFlow, tf2jax, OpenVINO, ONNX Runtime and in-process JAX",
             "",
             f"Written by `{goals.COMMAND}` ({results['mode']} mode), all figures from one run "
             f"({results['started']} to {results['finished']}) on one machine: "
             f"{as_markdown(results['machine'])} Raw numbers: `docs/benchmarks.json`.", "",
             f"Models: {models}, frozen with re-scaled weights (activations of order 1) and fed the same input "
             "by every peer. The machine is shared and noisy: runs differ by 30% or more, so read ratios "
             "measured side by side, not bare times.", "",
             *_language_models(results), *_goals(results), *goals.analysis(results), *_compile(results),
             *_compile_by_digest(results),
             *_execute(results), *_tiny(results),
             *_transfer(results), *_throughput(results), *_load(results), *_training(results), *_batching(results),
             *_tfserving(results), *_scaling(results),
             *_profiles(results)]
    return "\n".join(lines).rstrip() + "\n"
