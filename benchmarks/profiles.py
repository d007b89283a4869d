"""Profiles of the paths behind the goals, run after the measurements so that the profilers' cost lands on no
number: py-spy samples the `xlacs serve` process (the thread holding the GIL), cProfile the client thread."""
from __future__ import annotations

import collections
import cProfile
import os
import pathlib
import pstats
import shutil
import signal
import subprocess
import sys
import time
from typing import Callable

TOP = 8
# Frames under every sampled thread: they say nothing about where the time goes.
PLUMBING = ("(threading.py)", "(concurrent/futures/thread.py)")


def _py_spy() -> str | None:
    return shutil.which("py-spy", path=f"{pathlib.Path(sys.executable).parent}:{os.environ.get('PATH', '')}")


def _function(frame: str) -> str:
    """'name (path/file.py:123)' -> 'name (path/file.py)': lines of one function count together."""
    name, _, where = frame.rpartition(" (")
    return f"{name} ({where.rsplit(':', 1)[0]})" if name else frame


def summarize_raw(raw: str) -> dict:
    """Self and inclusive shares of py-spy's raw (collapsed) stacks, by function."""
    own, inclusive, total = collections.Counter(), collections.Counter(), 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = [_function(f) for f in stack.split(";")]
        total += int(count)
        own[frames[-1]] += int(count)
        for function in set(frames):
            if not function.endswith(PLUMBING):
                inclusive[function] += int(count)

    def share(counter: collections.Counter) -> list[tuple[str, float]]:
        return [(f, round(100 * n / total, 1)) for f, n in counter.most_common(TOP)]
    return {"samples": total, "self_percent": share(own), "inclusive_percent": share(inclusive)}


def _client_profile(workload: Callable[[], None]) -> list[tuple[str, float]]:
    """The client thread's top functions by own time, as a percentage of the workload's time."""
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.runcall(workload)
    elapsed = time.perf_counter() - start
    stats = pstats.Stats(profile).stats
    rows = sorted(((f"{name} ({pathlib.Path(path).name}:{line})", tottime) for (path, line, name),
                   (_, _, tottime, _, _) in stats.items()), key=lambda row: -row[1])
    return [(name, round(100 * t / elapsed, 1)) for name, t in rows[:TOP]]


def profile(pid: int, workload: Callable[[], None], directory: pathlib.Path, label: str, rate: int = 200) -> dict:
    """Runs `workload` once under both profilers: py-spy on process `pid` (`rate` samples a second),
    cProfile on this thread."""
    binary = _py_spy()
    out = {"label": label}
    if binary is None:
        out["server"] = "py-spy is not installed: scripts/bench installs it"
        out["client_self_percent"] = _client_profile(workload)
        return out
    raw = directory / f"py-spy-{label.replace(' ', '-')}.txt"
    log = directory / f"py-spy-{label.replace(' ', '-')}.log"
    with open(log, "w") as log_file:
        spy = subprocess.Popen([binary, "record", "--pid", str(pid), "--gil", "--rate", str(rate), "--format", "raw",
                                "--output", str(raw)], stdout=log_file, stderr=subprocess.STDOUT)
    time.sleep(1)  # py-spy attaches
    try:
        out["client_self_percent"] = _client_profile(workload)
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=60)
    out["server"] = summarize_raw(raw.read_text()) if raw.exists() else f"py-spy failed: {log.read_text()[-500:]}"
    return out


def for_seconds(fn: Callable[[], object], seconds: float) -> Callable[[], None]:
    """A workload: `fn` called back to back for `seconds`."""
    def workload() -> None:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            fn()
    return workload
