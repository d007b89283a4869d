"""Load and soak test on loopback: N clients for M seconds against `xlacs serve` with its default limits and
authentication on, mixing Compile and Execute with bad requests whose errors are intended.

Reports every status by request kind, the errors that were not intended (there should be none), latency
percentiles, and the daemon's RSS over the run (it should stay flat once warm). `--write-docs` puts the
limits table (from the settings' defaults) and these figures into docs/security.md.

    .venv/bin/python scripts/load_test.py --clients 8 --seconds 120 --write-docs
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import pathlib
import random
import secrets
import sys
import tempfile
import threading
import time

import grpc
import numpy as np

from xlacs import Client
from xlacs.v1 import xlacs_pb2
from xlacs_server.daemon_process import DaemonProcess

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "security.md"
OK = "OK"
# More clients than a gate admits (slots + queue) is overload: the daemon sheds the excess at once. That is
# intended for any request, and counted apart.
SHED = "RESOURCE_EXHAUSTED (busy)"

# (setting, what it bounds, the status over it); the defaults come from xlacs_server.config.Settings.
LIMITS = [
    ("max_graph_bytes", "bytes of a GraphDef (Compile, CheckGraph; by digest, the size `graph_digest` names), and "
                        "of one blob (UploadBlobs, at its first chunk)", "RESOURCE_EXHAUSTED"),
    ("max_graph_nodes", "nodes of a graph plus its function library; digests one FindMissingBlobs asks about; "
                        "cuts of a `graph_manifest`", "RESOURCE_EXHAUSTED"),
    ("max_function_depth", "library functions nested in calls, If, While (recursion: INVALID_ARGUMENT)",
     "RESOURCE_EXHAUSTED"),
    ("max_tensor_elements", "elements of any one tensor: a feed, a constant, or one computed (before the "
                            "host allocates it)", "RESOURCE_EXHAUSTED"),
    ("max_input_bytes", "bytes of the inputs of one Execute", "RESOURCE_EXHAUSTED"),
    ("max_fill_bytes", "bytes of constant values a GraphDef does not carry but TensorFlow fills in (a last value "
                       "repeated), per request; a single value repeated stays one value broadcast and costs nothing",
     "RESOURCE_EXHAUSTED"),
    ("max_attr_list_length", "items of any one list attr", "RESOURCE_EXHAUSTED"),
    ("max_concurrent_compiles", "Compile and CheckGraph calls running at once", "(they wait)"),
    ("compile_queue", "Compile and CheckGraph calls waiting for a slot; with the slots, the UploadBlobs calls at "
                      "once (each holds one blob at a time)", "RESOURCE_EXHAUSTED, at once"),
    ("max_concurrent_executes", "Execute calls running at once", "(they wait)"),
    ("execute_queue", "Execute calls waiting for a slot", "RESOURCE_EXHAUSTED, at once"),
    ("compile_deadline_s", "seconds a compile may take (the client's deadline applies too)", "DEADLINE_EXCEEDED"),
    ("execute_deadline_s", "seconds a program with loops may run, in an execution worker that is then killed "
                           "(the client's deadline applies too)", "DEADLINE_EXCEEDED"),
    ("workers", "gRPC threads; calls beyond them. Those the gated calls leave, but one for health checks, bound the "
                "infers waiting in or run by dynamic batchers, all models together", "RESOURCE_EXHAUSTED, at once"),
    ("max_sessions", "shared-memory sessions open at once (OpenSession calls, which hold no gRPC thread)",
     "RESOURCE_EXHAUSTED"),
    ("max_session_regions", "shared-memory regions registered in one session", "RESOURCE_EXHAUSTED"),
    ("max_loaded", "executable ids (a program bound to its weights) kept loaded", "the least recently used go"),
    ("blob_memory_bytes", "blobs and graph manifests kept in the process",
     "the least recently used go (a Compile by digest that needs one is NOT_FOUND naming it, and the client "
     "uploads it again)"),
    ("max_weight_bytes", "device-resident weights of the loaded ids, prepared weights included; the least "
                         "recently used ids go (an Execute of one is NOT_FOUND, and the client compiles again)", "RESOURCE_EXHAUSTED for one graph "
                                                                              "whose weights alone exceed it"),
    ("max_resident_bytes", "bytes of the resident tensors: outputs Executes kept on the device (OutputRequest.keep) "
                           "until FreeTensors or their time to live (`resident_ttl_s` by default) frees them",
     "RESOURCE_EXHAUSTED for an Execute that keeps outputs; nothing is kept"),
    ("max_resident_tensors", "resident tensors, whatever their size", "RESOURCE_EXHAUSTED for an Execute that keeps "
                                                                      "outputs; nothing is kept"),
    ("max_state_bytes", "bytes of the variable states' variables: models trained on the device (CreateState) until "
                        "DeleteState frees them (`docs/training.md`)", "RESOURCE_EXHAUSTED for a CreateState; nothing "
                                                                      "is copied"),
    ("max_states", "variable states, whatever their size", "RESOURCE_EXHAUSTED for a CreateState"),
    ("max_device_bytes", "per device: its weights, resident tensors and variable states together (Device memory, "
                         "below); a bind drops the device's least recently used ids first", "RESOURCE_EXHAUSTED "
                         "naming the device and its bytes in use: a bind that would not fit without the resident "
                         "tensors and states (nothing is evicted), an Execute that keeps outputs, a CreateState"),
]


# --- Requests ------------------------------------------------------------------------------------------

def dense_graph(rows: int):
    """A frozen dense layer, relu(x @ w + b) then softmax, for a [rows, 64] input."""
    import tensorflow as tf
    from xlacs import freeze
    rng = np.random.default_rng(rows)
    w, b = tf.constant(rng.standard_normal((64, 32), np.float32)), tf.constant(rng.standard_normal(32, np.float32))
    return freeze(lambda x: tf.nn.softmax(tf.nn.relu(tf.matmul(x, w) + b)), tf.TensorSpec([rows, 64], tf.float32))


def huge_fill_graph() -> bytes:
    """A graph that asks for a [10^6, 10^6] tensor, built without running TF (which would try to fold it)."""
    import tensorflow as tf
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        tf.identity(tf.reduce_sum(tf.fill([1_000_000, 1_000_000], 0.0)) + x[0], name="y")
    return g.as_graph_def().SerializeToString()


@dataclasses.dataclass
class Workload:
    graphs: list  # FrozenGraphs: a few signatures, compiled again and again (cache hits once warm)
    huge: bytes
    garbage: bytes


# Request kind -> (weight, the intended status). Good calls compile and run the dense graphs.
REQUESTS = {
    "compile": (0.2, OK),
    "execute": (0.6, OK),
    "garbage graph": (0.04, "INVALID_ARGUMENT"),
    "unknown feed": (0.04, "INVALID_ARGUMENT"),
    "wrong input shape": (0.03, "INVALID_ARGUMENT"),
    "unknown executable": (0.03, "NOT_FOUND"),
    "10^12 elements": (0.03, "RESOURCE_EXHAUSTED"),
    "no token": (0.03, "UNAUTHENTICATED"),
}


def calls(workload: Workload, client: Client, stranger: Client) -> dict[str, object]:
    """Request kind -> a call that makes one such request; `stranger` has no token."""
    executables = {}
    g0 = workload.graphs[0]

    def compile_good():
        index = random.randrange(len(workload.graphs))
        g = workload.graphs[index]
        executables[index] = client.compile(g.graph_def, g.feeds, g.fetches)

    def execute_good():
        if not executables:
            return compile_good()
        executable = random.choice(list(executables.values()))
        executable(*[np.random.standard_normal(tuple(s.shape)).astype(np.float32) for s in executable.signature.inputs])

    def wrong_input():
        client.compile(g0.graph_def, g0.feeds, g0.fetches)(np.zeros((3, 3), np.float32))

    def unknown_executable():
        client.stub.Execute(xlacs_pb2.ExecuteRequest(executable_id="graph-0123456789abcdef"), timeout=60)

    return {
        "compile": compile_good,
        "execute": execute_good,
        "garbage graph": lambda: client.compile(workload.garbage, g0.feeds, g0.fetches),
        "unknown feed": lambda: client.compile(g0.graph_def, {"nope:0": ("float32", (1,))}, g0.fetches),
        "wrong input shape": wrong_input,
        "unknown executable": unknown_executable,
        "10^12 elements": lambda: client.compile(workload.huge, {"x:0": ("float32", (2,))}, ["y:0"]),
        "no token": lambda: stranger.ops(),
    }


# --- The run -------------------------------------------------------------------------------------------

def start_daemon(directory: pathlib.Path, token: str) -> DaemonProcess:
    """`xlacs serve` on a free loopback port with the default limits and a bearer token."""
    return DaemonProcess(directory / "serve.log", {"XLACS_AUTH_TOKENS": token, "XLACS_CACHE_DIR": ""})


@dataclasses.dataclass
class Report:
    clients: int
    seconds: float
    calls: int
    statuses: dict  # kind -> {status: count}
    unintended: list  # (kind, status, message), the first few
    unintended_count: int
    latency_ms: dict  # kind -> {p50, p99}
    rss_mib: dict  # start (warm), end, max, growth_pct

    @property
    def passed(self) -> bool:
        return self.unintended_count == 0


def run(clients: int, seconds: float) -> Report:
    workload = Workload([dense_graph(rows) for rows in (1, 4, 16, 64)], huge_fill_graph(),
                        np.random.default_rng(0).bytes(4096))
    token = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory() as directory:
        daemon = start_daemon(pathlib.Path(directory), token)
        try:
            return _drive(daemon, workload, token, clients, seconds)
        finally:
            daemon.stop()


def _drive(daemon: DaemonProcess, workload: Workload, token: str, clients: int, seconds: float) -> Report:
    statuses = collections.defaultdict(collections.Counter)
    latencies = collections.defaultdict(list)
    unintended = []
    lock = threading.Lock()
    stop = threading.Event()
    rss = []

    def client_loop(seed: int, warm: threading.Barrier):
        random.seed(seed)
        with Client(daemon.address, timeout=300, token=token) as client, \
                Client(daemon.address, timeout=60) as stranger:
            table = calls(workload, client, stranger)
            for call in table.values():  # warm up: every request kind once
                try:
                    call()
                except grpc.RpcError:
                    pass
            warm.wait()
            names = list(REQUESTS)
            weights = [REQUESTS[n][0] for n in names]
            while not stop.is_set():
                kind = random.choices(names, weights)[0]
                intended, call = REQUESTS[kind][1], table[kind]
                start = time.perf_counter()
                try:
                    call()
                    status, message = OK, ""
                except grpc.RpcError as e:
                    status, message = e.code().name, e.details()
                    if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and " is busy " in message:
                        status = SHED
                with lock:
                    statuses[kind][status] += 1
                    latencies[kind].append((time.perf_counter() - start) * 1e3)
                    if status not in (intended, SHED):
                        unintended.append((kind, status, message))

    def sample_rss():
        while not stop.wait(0.5):
            rss.append((time.monotonic(), daemon.rss_mib()))

    with Client(daemon.address, timeout=300, token=token) as client:
        for g in workload.graphs:  # every program compiled once: the run's compiles are cache hits
            client.compile(g.graph_def, g.feeds, g.fetches)
    warm = threading.Barrier(clients + 1)
    threads = [threading.Thread(target=client_loop, args=(i, warm), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    warm.wait()  # the clock starts once every client has warmed up
    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    time.sleep(seconds)
    stop.set()
    for t in [*threads, sampler]:
        t.join(timeout=600)
    return Report(
        clients, seconds, sum(sum(c.values()) for c in statuses.values()),
        {k: dict(c) for k, c in sorted(statuses.items())}, unintended[:10], len(unintended),
        {k: {"p50": round(float(np.percentile(v, 50)), 1), "p99": round(float(np.percentile(v, 99)), 1)}
         for k, v in sorted(latencies.items())},
        {"start": round(rss[0][1], 1), "end": round(rss[-1][1], 1), "max": round(max(m for _, m in rss), 1),
         "growth_pct": round(100 * (rss[-1][1] - rss[0][1]) / rss[0][1], 1)})


# --- Docs ----------------------------------------------------------------------------------------------

def limits_table() -> str:
    from xlacs_server.config import Settings
    defaults = Settings()
    rows = ["| Setting (env) | Default | Bounds | Over it |", "| --- | --- | --- | --- |"]
    for name, what, status in LIMITS:
        rows.append(f"| `{name}` (`XLACS_{name.upper()}`) | {_human(name, getattr(defaults, name))} | {what} | "
                    f"{status} |")
    return "\n".join(rows)


def _human(name: str, value) -> str:
    if name.endswith("_bytes") and value >= 1 << 20:
        return f"{value} ({value / (1 << 20):g} MiB)"
    if name == "max_device_bytes" and not value:
        return "0: derived per device"
    if name == "max_tensor_elements":
        return f"{value} (2^{value.bit_length() - 1})" if value & (value - 1) == 0 else str(value)
    return str(value)


def figures(report: Report) -> str:
    shed = sum(c.get(SHED, 0) for c in report.statuses.values())
    rows = [f"{report.clients} clients for {report.seconds:g} s on loopback ({os.cpu_count()} cores, shared): "
            f"{report.calls} calls, {report.calls / report.seconds:.0f}/s; "
            f"**{report.unintended_count} unintended errors**; {shed} calls shed at once because more clients "
            f"compiled than the compile gate admits ({SHED}). Daemon RSS once warm: "
            f"{report.rss_mib['start']} MiB at the start, {report.rss_mib['end']} MiB at the end "
            f"(max {report.rss_mib['max']}, {report.rss_mib['growth_pct']:+}%).", "",
            "| Request | Statuses | p50 ms | p99 ms |", "| --- | --- | --- | --- |"]
    for kind, counts in report.statuses.items():
        shown = ", ".join(f"{status} {n}" for status, n in sorted(counts.items()))
        rows.append(f"| {kind} | {shown} | {report.latency_ms[kind]['p50']} | {report.latency_ms[kind]['p99']} |")
    return "\n".join(rows)


def write_section(text: str, name: str, body: str) -> str:
    """`text` with the generated section between `<!-- name -->` and `<!-- /name -->` replaced by `body`."""
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    head, found, rest = text.partition(start)
    if not found:
        raise ValueError(f"{DOC} has no {start} marker")
    return f"{head}{start}\n{body}\n{end}{rest.partition(end)[2]}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--write-docs", action="store_true", help=f"update the generated sections of {DOC}")
    args = parser.parse_args(argv)
    report = run(args.clients, args.seconds)
    print(json.dumps(dataclasses.asdict(report), indent=2))
    if args.write_docs:
        text = write_section(DOC.read_text(), "limits", limits_table())
        DOC.write_text(write_section(text, "load-test", figures(report)))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
