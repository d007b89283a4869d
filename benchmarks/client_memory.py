"""The client's peak memory during one Execute, measured in a process of its own: the most its resident set grew
(Linux VmHWM, reset through /proc/self/clear_refs) above what it held with the inputs made, the channel open and
the executable compiled. Run as

    python -m benchmarks.client_memory ADDRESS SPEC_JSON [unary]

SPEC_JSON names the frozen graph's file, its feeds and fetches; "unary" makes the client send every call as a
unary Execute. Prints {"peak_bytes": N} as JSON."""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import numpy as np


def measure(address: str, model, directory: pathlib.Path, unary: bool = False) -> int:
    """Peak bytes the client's process grew by during one Execute of `model` (a benchmarks.models.Model)."""
    graph = directory / f"{model.name.replace(' ', '_')}.pb"
    graph.write_bytes(model.frozen.graph_def)
    spec = directory / f"{model.name.replace(' ', '_')}.json"
    spec.write_text(json.dumps({"graph": str(graph), "fetches": model.frozen.fetches,
                                "feeds": {n: [str(np.dtype(d)), list(s)] for n, (d, s) in model.frozen.feeds.items()}}))
    out = subprocess.run([sys.executable, "-m", "benchmarks.client_memory", address, str(spec),
                          *(["unary"] if unary else [])], check=True, capture_output=True, text=True, timeout=600)
    return json.loads(out.stdout.splitlines()[-1])["peak_bytes"]


def _status_kib(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+)", pathlib.Path("/proc/self/status").read_text()).group(1))


def main() -> None:
    from xlacs import Client, streaming
    address, spec_path, *mode = sys.argv[1:]
    spec = json.loads(pathlib.Path(spec_path).read_text())
    if mode == ["unary"]:
        streaming.STREAM_BYTES = float("inf")
    with Client(address, timeout=600) as client:
        executable = client.compile(spec["graph"], {n: tuple(v) for n, v in spec["feeds"].items()}, spec["fetches"])
        inputs = [np.ones(shape, dtype) for dtype, shape in spec["feeds"].values()]
        pathlib.Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from the resident set now
        before = _status_kib("VmRSS")
        executable(*inputs)
        print(json.dumps({"peak_bytes": (_status_kib("VmHWM") - before) * 1024}))


if __name__ == "__main__":
    main()
