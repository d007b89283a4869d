"""Compiled executables (weight-independent programs) and their bindings to weights, which Execute runs."""
from __future__ import annotations

import dataclasses
import functools
import threading
import time
from typing import Callable

import jax
import numpy as np

from xlacs_server.errors import InvalidRequest
from xlacs_server.execute.devices import DeviceRef
from xlacs_server.execute.program import Program, device_put
from xlacs_server.tensor_sig import TensorSig
from xlacs_server.unit.variables import INPUT_PREFIX as VARIABLE_PREFIX

# Which program an executable runs (compile/tier_up.py): a tiered compile's, compiled with quick options, until
# the optimized one replaces it; every other executable's is optimized.
QUICK, OPTIMIZED = "quick", "optimized"


@dataclasses.dataclass
class Prepare:
    """The weight-only part of an executable (compile/prepare.py), run once per weight set when weights are
    bound: it takes the lifted weights at `params` and returns the prepared weights (`outputs`). The per-call
    program takes the lifted weights at `call_params`, then the prepared ones."""
    compiled: Program
    params: list[int]  # indices into Executable.params
    call_params: list[int]
    outputs: list[TensorSig]
    stablehlo: str
    serialized: bytes  # what the cache stores; small (elementwise arithmetic, reshapes, transposes)
    ms: float = 0.0  # the time its last run took, at a bind

    def run(self, weights: list[jax.Array]) -> list[jax.Array]:
        """The prepared weights of `weights` (every lifted weight, in Executable.params order)."""
        start = time.perf_counter()
        prepared = self.compiled(*[weights[i] for i in self.params])
        jax.block_until_ready(prepared)
        self.ms = (time.perf_counter() - start) * 1e3
        return prepared


@dataclasses.dataclass
class Executable:
    """One compiled program: the cache's unit. Takes the feeds, then the lifted weights, by position; the
    names in `inputs` and `outputs` are those of the request that compiled it. With a `prepare` part, the
    program is the per-call part: it takes the feeds, then the lifted weights at `prepare.call_params`, then the
    prepared weights."""
    key: str
    graph_name: str
    device: DeviceRef
    inputs: list[TensorSig]
    outputs: list[TensorSig]
    params: list[TensorSig]
    compiled: Program  # called as compiled(*feeds, *weights)
    stablehlo: str
    stage_ms: dict[str, float]
    passes: list
    size_bytes: int  # of the serialized programs, both parts
    op_histogram: dict[str, int] = dataclasses.field(default_factory=dict)  # op -> nodes of the lowered graph
    created: float = dataclasses.field(default_factory=time.time)
    hits: int = 0
    last_used: float = 0.0
    # Kept only for programs that run in execution workers (the service decides, see isolation.py): what a
    # worker loads.
    serialized: bytes | None = dataclasses.field(default=None, repr=False)
    prepare: Prepare | None = None
    tier: str = OPTIMIZED
    # While `tier` is QUICK: compiles the optimized program (compile/tier_up.py swaps it in for `compiled`).
    optimize: Callable[[], Program] | None = dataclasses.field(default=None, repr=False)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    @property
    def isolated(self) -> bool:
        """Whether it runs in an execution worker rather than in the daemon."""
        return self.serialized is not None

    def touch(self) -> None:
        with self._lock:
            self.hits += 1
            self.last_used = time.time()


@dataclasses.dataclass
class RunTimes:
    """Where one run's time went, in seconds, as Triton's statistics split it: the inputs onto the device
    (compute_input), the program (compute_infer), the outputs back to the host (compute_output)."""
    input_s: float = 0.0
    infer_s: float = 0.0
    output_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.input_s + self.infer_s + self.output_s


@dataclasses.dataclass
class LoadedExecutable:
    """What an executable id names: a program bound to one set of device-resident weights (what its program
    takes after the inputs: the lifted weights, or those the per-call part takes and the prepared ones), with
    the feed and fetch names of the request that loaded it."""
    id: str
    executable: Executable
    weights: list[jax.Array]
    inputs: list[TensorSig]
    outputs: list[TensorSig]

    @functools.cached_property
    def input_names(self) -> frozenset[str]:
        return frozenset(s.name for s in self.inputs)

    @functools.cached_property
    def variable_positions(self) -> tuple[int, ...]:
        """Where the variables are among the inputs: a call of a program without any checks none (a tiny
        Execute spent 3.5% of its handler's time asking each feed, docs/data_plane.md)."""
        return tuple(i for i, s in enumerate(self.inputs) if s.name.startswith(VARIABLE_PREFIX))

    def check_inputs(self, given: dict[str, np.ndarray | jax.Array]) -> list[np.ndarray | jax.Array]:
        """The inputs in signature order, after checking names, dtypes and shapes (a jax.Array is a resident
        tensor's, execute/resident.py)."""
        expected = self.input_names
        if given.keys() != expected:
            unknown, missing = sorted(given.keys() - expected), sorted(expected - given.keys())
            raise InvalidRequest(f"executable {self.id} takes inputs {sorted(expected)}; "
                                 f"unknown: {unknown}, missing: {missing}")
        ordered = []
        for sig in self.inputs:
            array = given[sig.name]
            if array.dtype != sig.dtype or tuple(array.shape) != sig.shape:
                raise InvalidRequest(f"input {sig.name!r}: expected {sig}, got {array.dtype}{list(array.shape)}")
            ordered.append(array)
        return ordered

    def run(self, given: dict[str, np.ndarray | jax.Array], keep: frozenset[int] = frozenset(),
            handed_over: bool = False, times: RunTimes | None = None) -> list:
        """The outputs on the host, but those at the positions in `keep`, which stay on the device. A resident
        tensor on another device of this daemon is copied to this one, device to device. The program may donate
        its variable inputs (compile/compiler.py): a jax.Array given for one is copied first, unless the caller
        hands its variables over (`handed_over`: a variable state, which the assigned outputs replace). With
        `times`, the run waits for the program before copying the outputs, to say where its time went."""
        start = time.perf_counter()
        arrays = device_put(self.check_inputs(given), self.executable.device.device)
        if not handed_over:
            for i in self.variable_positions:
                if isinstance(given[self.inputs[i].name], jax.Array):
                    arrays[i] = arrays[i].copy()
        if times is not None:
            jax.block_until_ready(arrays)
            put = time.perf_counter()
        outputs = self.executable.compiled(*arrays, *self.weights)
        self.executable.touch()
        if times is not None:
            jax.block_until_ready(outputs)
            ran = time.perf_counter()
        host = [out if i in keep else np.asarray(out) for i, out in enumerate(outputs)]
        if times is not None:
            times.input_s, times.infer_s, times.output_s = put - start, ran - put, time.perf_counter() - ran
        return host
