"""A Compile as the compile path takes it (CompileSpec), what it answers (CompileResult), and the stopwatch that
times its stages, stops it between them and holds its compile slot."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import time
from typing import Callable

from xlacs.v1 import xlacs_pb2

from xlacs_server.digest import Digest
from xlacs_server.execute.executable import LoadedExecutable
from xlacs_server.graph import limits as graph_limits
from xlacs_server.lower import limits
from xlacs_server.unit.signature import Feed


@dataclasses.dataclass(frozen=True)
class CompileSpec:
    """A Compile request: the GraphDef and its signature, the device to compile for, the executable's name. A
    Compile by digest names the GraphDef by `graph_digest` (its bytes, if sent too, are checked and kept), with
    the request's manifest (xlacs.v1.GraphManifest) if it has one."""
    graph_def: bytes
    feeds: list[Feed]
    fetches: list[str]
    device: str = ""
    graph_name: str = ""
    graph_digest: Digest | None = None
    graph_manifest: xlacs_pb2.GraphManifest | None = None
    bucket_sizes: tuple[int, ...] = ()  # for feeds with unknown (-1) dims (buckets/)
    wait_optimized: bool = False  # answer with the optimized program, never a tiered compile's quick one


@dataclasses.dataclass
class CompileResult:
    loaded: LoadedExecutable
    cache: str  # "miss" or the tier that hit
    stage_ms: dict[str, float]
    tier: str = ""  # the program it answered with (execute/executable.py's QUICK or OPTIMIZED)


def no_checkpoint(stage: str) -> None:
    """A call made in-process runs to its end."""


@contextlib.contextmanager
def no_slot():
    """A call made in-process waits for no slot."""
    yield


def within_limits(method):
    """Runs a method of an object with `settings` with the settings' element limit in scope of the passes and the
    lowering, and a fresh decode budget for the request's GraphDef."""
    @functools.wraps(method)
    def scoped(self, *args, **kwargs):
        with limits.max_tensor_elements(self.settings.max_tensor_elements), graph_limits.decode_budget(self.settings):
            return method(self, *args, **kwargs)
    return scoped


class Stopwatch:
    """Times the stages of a call; `checkpoint(stage)` runs before each, and raises to stop the call there;
    `slot()` holds one of the daemon's compile slots (gates.py) around the costly stages."""

    def __init__(self, checkpoint: Callable[[str], None] = no_checkpoint, slot=no_slot):
        self.ms: dict[str, float] = {}
        self.checkpoint = checkpoint
        self._slot = slot
        # Set once the call has its answer (or its error): a tier-up or a store of prepared weights it queued starts
        # then, so that neither slows the bind and the prepare run of the Compile it answers (compile/tier_up.py).
        self.answered = threading.Event()

    @contextlib.contextmanager
    def slot(self):
        start = time.perf_counter()
        with self._slot():
            self.ms["queue"] = (time.perf_counter() - start) * 1e3
            yield

    @contextlib.contextmanager
    def stage(self, name: str):
        self.checkpoint(name)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - start) * 1e3
