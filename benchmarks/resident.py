"""Resident outputs (issue 17, docs/data_plane.md): a pipeline of two executables, the first's output the second's
input, run with a handle (the intermediate stays on the daemon's device, and is freed after) beside the same two
Executes with the intermediate sent to the client and back, interleaved, for intermediates of growing size. The
first executable broadcasts a scalar to the intermediate, the second reads one element of it: the calls carry
little besides the intermediate.

    .venv/bin/python -m benchmarks.resident [--sizes-mb 1,16,64] [--seconds 3]
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks import models  # noqa: E402
from benchmarks.processes import ServeProcess  # noqa: E402
from benchmarks.timing import interleaved  # noqa: E402

HANDLES, ROUND_TRIPS = "handles", "round trips"


def pipeline(client, size_mb: int, seconds: float) -> dict:
    """p50/p99 of the pipeline both ways, and the round trips' p50 over the handles' (above 1: handles win)."""
    nbytes = size_mb * models.MB
    produce, consume = models.download(nbytes), models.upload(nbytes)
    first, second = produce.compile(client), consume.compile(client)

    def with_handles():
        (intermediate,) = first.execute(produce.inputs, keep=True)
        (y,) = second.execute([intermediate])
        intermediate.free()
        return y

    def with_round_trips():
        (intermediate,) = first.execute(produce.inputs)
        return second.execute([intermediate])[0]

    np.testing.assert_array_equal(with_handles(), with_round_trips())
    samples = interleaved({HANDLES: with_handles, ROUND_TRIPS: with_round_trips}, seconds, min_calls=5)
    return {**{path: s.summary() for path, s in samples.items()},
            "round_trips_over_handles": samples[ROUND_TRIPS].p50 / samples[HANDLES].p50}


def measure(client, sizes_mb: list[int], seconds: float) -> dict:
    return {f"{size} MB": pipeline(client, size, seconds) for size in sizes_mb}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", default="1,16,64", help="sizes of the intermediate, comma-separated")
    parser.add_argument("--seconds", type=float, default=3.0, help="per size, both paths interleaved")
    args = parser.parse_args()
    server = ServeProcess(pathlib.Path(tempfile.mkdtemp(prefix="xlacs-bench-")))
    try:
        with server.client() as client:
            results = measure(client, [int(s) for s in args.sizes_mb.split(",")], args.seconds)
    finally:
        server.stop()
    print(json.dumps({"load_average": os.getloadavg(), "pipeline": results}, indent=1))


if __name__ == "__main__":
    main()
