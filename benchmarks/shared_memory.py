"""Same-host shared memory (issue 17, docs/data_plane.md): one Execute of x + 1 on 256 MiB, its input read from and
its output written into the client's shared-memory region (a sealed memfd, which the daemon maps, and a POSIX
object, which it reads and writes with pread and pwrite), beside the same call with the bytes over gRPC,
interleaved. Effective GB/s: the bytes in and out (2 x 256 MiB) over the p50 call.

    .venv/bin/python -m benchmarks.shared_memory [--seconds 10] [--no-wire]    # against a daemon of its own
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
POSIX = "xlacs Execute, shared memory in a POSIX object"  # not sealed: read and written with system calls
NBYTES = 256 * models.MB
# glibc's malloc without transparent huge pages (settings.malloc_tunables asks for them by default): XLA's output
# buffers, fresh each call, then fault in 4 KiB at a time
GLIBC_DEFAULTS = "XLACS_MALLOC_TUNABLES="


def measure(client, seconds: float, nbytes: int = NBYTES, wire: bool = True) -> dict:
    """p50 and effective GB/s of each way, with what the shared-memory call moved through gRPC."""
    model = models.round_trip(nbytes)
    executable = model.compile(client)
    (x,), (feed,), (fetch,) = model.inputs, executable.input_names, executable.output_names
    with SharedMemory(client, 2 * nbytes + 4096) as shm, SharedMemory(client, 2 * nbytes + 4096, sealed=False) as obj:
        (x_in, y), (x_obj, y_obj) = ((m.put(x), m.array(x.shape, x.dtype)) for m in (shm, obj))
        for a, b in ((x_in, y), (x_obj, y_obj)):
            executable.execute({feed: a}, out={fetch: b})
            np.testing.assert_array_equal(b, x + 1)
        sent = client.stats().received_bytes["Execute"]
        peers = {SHARED: lambda: executable.execute({feed: x_in}, out={fetch: y}),
                 POSIX: lambda: executable.execute({feed: x_obj}, out={fetch: y_obj})}
        samples = interleaved({**peers, **({WIRE: lambda: executable(x)} if wire else {})}, seconds, min_calls=3)
        shared_calls = len(samples[SHARED].ms) + len(samples[POSIX].ms) + 2  # and each peer's warm-up call
        request_bytes = (client.stats().received_bytes["Execute"] - sent) / shared_calls
        del x_in, y, x_obj, y_obj
    return {"bytes": nbytes, "request_bytes_per_shared_call": request_bytes, **{
        peer: {**s.summary(), "gb_per_s": 2 * nbytes / (s.p50 / 1e3) / 1e9} for peer, s in samples.items()}}


def main() -> None:
    from benchmarks.processes import ServeProcess
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10, help="per way, in 5 interleaved turns")
    parser.add_argument("--daemon-env", action="append", default=[], metavar="NAME=VALUE",
                        help=f"in the daemon's environment, e.g. {GLIBC_DEFAULTS} (docs/data_plane.md)")
    parser.add_argument("--no-wire", action="store_true", help="leave out the call with the bytes over gRPC")
    args = parser.parse_args()
    server = ServeProcess(pathlib.Path(tempfile.mkdtemp(prefix="xlacs-bench-")),
                          dict(item.split("=", 1) for item in args.daemon_env))
    try:
        with server.client() as client:
            result = measure(client, args.seconds, wire=not args.no_wire)
    finally:
        server.stop()
    for peer in (SHARED, POSIX, WIRE)[:3 - args.no_wire]:
        r = result[peer]
        print(f"{peer}: p50 {r['p50_ms']:.1f} ms, {r['gb_per_s']:.2f} GB/s effective ({r['n']} calls)")
    print(f"gRPC request bytes per shared-memory call: {result['request_bytes_per_shared_call']:.0f}")


if __name__ == "__main__":
    main()
