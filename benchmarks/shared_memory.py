"""Same-host shared memory (issue 17, docs/data_plane.md): one Execute of x + 1 on 256 MiB, its input read from and
its output written into the client's shared-memory region, beside the same call with the bytes over gRPC,
interleaved. Effective GB/s: the bytes in and out (2 x 256 MiB) over the p50 call.

    .venv/bin/python -m benchmarks.shared_memory [--seconds 10]    # against a daemon of its own
"""
from __future__ import annotations

import argparse
import pathlib
import tempfile

import numpy as np

from benchmarks import models
from benchmarks.timing import interleaved
from xlacs import SharedMemory

SHARED, WIRE = "xlacs Execute, shared memory", "xlacs Execute, bytes over gRPC"
NBYTES = 256 * models.MB
# glibc's malloc asks for transparent huge pages: XLA's output buffers, fresh each call, then fault in 2 MiB at a time
HUGE_PAGES = "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"


def measure(client, seconds: float, nbytes: int = NBYTES) -> dict:
    """p50 and effective GB/s of each way, with what the shared-memory call moved through gRPC."""
    model = models.round_trip(nbytes)
    executable = model.compile(client)
    (x,), (feed,), (fetch,) = model.inputs, executable.input_names, executable.output_names
    with SharedMemory(client, 2 * nbytes + 4096) as shm:
        x_in, y = shm.put(x), shm.array(x.shape, x.dtype)
        executable.execute({feed: x_in}, out={fetch: y})
        np.testing.assert_array_equal(y, x + 1)
        sent = client.stats().received_bytes["Execute"]
        samples = interleaved({SHARED: lambda: executable.execute({feed: x_in}, out={fetch: y}),
                               WIRE: lambda: executable(x)}, seconds, min_calls=3)
        shared_calls = len(samples[SHARED].ms) + 1  # and each peer's warm-up call
        request_bytes = (client.stats().received_bytes["Execute"] - sent) / shared_calls
        del x_in, y
    return {"bytes": nbytes, "request_bytes_per_shared_call": request_bytes, **{
        peer: {**s.summary(), "gb_per_s": 2 * nbytes / (s.p50 / 1e3) / 1e9} for peer, s in samples.items()}}


def main() -> None:
    from benchmarks.processes import ServeProcess
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10, help="per way, in 5 interleaved turns")
    parser.add_argument("--daemon-env", action="append", default=[], metavar="NAME=VALUE",
                        help=f"in the daemon's environment, e.g. {HUGE_PAGES} (docs/data_plane.md)")
    args = parser.parse_args()
    server = ServeProcess(pathlib.Path(tempfile.mkdtemp(prefix="xlacs-bench-")),
                          dict(item.split("=", 1) for item in args.daemon_env))
    try:
        with server.client() as client:
            result = measure(client, args.seconds)
    finally:
        server.stop()
    for peer in (SHARED, WIRE):
        r = result[peer]
        print(f"{peer}: p50 {r['p50_ms']:.1f} ms, {r['gb_per_s']:.2f} GB/s effective ({r['n']} calls)")
    print(f"gRPC request bytes per shared-memory call: {result['request_bytes_per_shared_call']:.0f}")


if __name__ == "__main__":
    main()
