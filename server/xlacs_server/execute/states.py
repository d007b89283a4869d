"""Variable states (docs/training.md): the values of a graph's resource variables kept on one device between
Executes, as tf2xla keeps a resource variable with its device. An Execute naming a state takes the executable's
variable inputs (`variables/<name>`) from it, and the values the run assigns replace them: the program donates those
inputs to its outputs (compile/compiler.py), so a training step updates the model in place instead of copying it.

Each state has a lock: two steps on one state never interleave, while steps on different states run side by side.
The states of a daemon stay within max_states and max_state_bytes, and each device's within its budget beside the
weights and resident tensors there (device_budget.py). A state lives only in memory: reading its
variables back (ReadVariables) is how a client checkpoints it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import secrets
import threading
import time
from typing import Iterator

import jax
import numpy as np

from xlacs_server.errors import InvalidRequest, LimitExceeded, StateLost, UnknownState
from xlacs_server.execute.device_budget import STATES, DeviceBudget
from xlacs_server.execute.devices import DeviceRef
from xlacs_server.execute.executable import LoadedExecutable
from xlacs_server.execute.program import device_put
from xlacs_server.unit.variables import INPUT_PREFIX

STATE_ID_BYTES = 24  # secrets.token_urlsafe: unguessable, as resident tensors' handles


@dataclasses.dataclass(eq=False)
class VariableState:
    id: str
    device: DeviceRef
    variables: dict[str, jax.Array]  # by the variable's name, without "variables/"
    nbytes: int  # constant: an assignment keeps a variable's dtype and shape (lower/variables.py)
    created: float = dataclasses.field(default_factory=time.time)
    steps: int = 0
    last_used: float = 0.0
    deleted: bool = False
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    def inputs_for(self, loaded: LoadedExecutable) -> dict[str, jax.Array]:
        """The executable's variable inputs from this state; INVALID_ARGUMENT naming a variable it lacks or holds
        with another dtype or shape, or the devices when the executable runs on another one."""
        if loaded.executable.device.name != self.device.name:
            raise InvalidRequest(f"state {self.id[:6]}… lives on {self.device.name}, executable {loaded.id} runs on "
                                 f"{loaded.executable.device.name}: create the state on {loaded.executable.device.name}"
                                 f" (CreateStateRequest.device) or compile for {self.device.name}")
        self.check_intact()
        given = {}
        for sig in loaded.inputs:
            if not sig.name.startswith(INPUT_PREFIX):
                continue
            name = sig.name[len(INPUT_PREFIX):]
            value = self.variables.get(name)
            if value is None:
                raise InvalidRequest(f"variable {name!r}: executable {loaded.id} takes it ({sig}), but the state "
                                     f"holds only {sorted(self.variables)}; create a state with it", variable=name)
            if value.dtype != sig.dtype or tuple(value.shape) != sig.shape:
                raise InvalidRequest(f"variable {name!r}: executable {loaded.id} takes {sig}, the state holds "
                                     f"{value.dtype}{list(value.shape)}", variable=name)
            given[sig.name] = value
        return given

    def check_intact(self) -> None:
        """FAILED_PRECONDITION when a step failed after its program had taken the variables' buffers over."""
        lost = sorted(n for n, a in self.variables.items() if a.is_deleted())
        if lost:
            raise StateLost(f"variable {lost[0]!r} of state {self.id[:6]}… is gone: a step failed after its program "
                            "had taken the variables' buffers over; delete the state and create it again from the "
                            "last variables you read", variable=lost[0])

    def assign(self, names: list[str], values: list) -> None:
        """The values a step assigned (outputs named `variables/<name>`), in place of the old ones."""
        for name, value in zip(names, values):
            self.variables[name[len(INPUT_PREFIX):]] = value if isinstance(value, jax.Array) else \
                device_put([np.asarray(value)], self.device.device)[0]
        self.steps += 1
        self.last_used = time.time()


class VariableStates:
    """The variable states of one daemon, by id."""

    def __init__(self, max_bytes: int, max_states: int, budget: DeviceBudget):
        self.max_bytes, self.max_states = max_bytes, max_states
        self.budget = budget
        self._states: dict[str, VariableState] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def create(self, variables: dict[str, np.ndarray], device: DeviceRef) -> VariableState:
        """A new state holding copies of `variables` on `device`; RESOURCE_EXHAUSTED past max_states,
        max_state_bytes or the device's budget."""
        if not variables:
            raise InvalidRequest("CreateState names no variable: give each variable's initial value, named as the "
                                 "executable's input without its 'variables/' prefix")
        bad = sorted(n for n in variables if not n or n.startswith(INPUT_PREFIX))
        if bad:
            raise InvalidRequest(f"variable {bad[0]!r}: name a variable without the {INPUT_PREFIX!r} prefix of the "
                                 "executable's input", variable=bad[0])
        size = sum(a.nbytes for a in variables.values())
        with self._lock:  # reserve, then copy outside the lock
            if len(self._states) + 1 > self.max_states:
                raise LimitExceeded(f"{len(self._states)} variable states are held", "max_states", self.max_states)
            if self._bytes + size > self.max_bytes:
                raise LimitExceeded(f"the variable states hold {self._bytes} bytes, and this one {size} more",
                                    "max_state_bytes", self.max_bytes)
            self.budget.charge(device.name, STATES, size, f"a variable state of {len(variables)} variable(s)")
            state = VariableState(secrets.token_urlsafe(STATE_ID_BYTES), device, {}, size)
            self._states[state.id] = state
            self._bytes += size
        with state.lock:
            try:
                with self.budget.allocating(device.name, "creating a variable state"):
                    state.variables = dict(zip(variables, device_put(list(variables.values()), device.device)))
            except BaseException:
                self._drop(state)
                raise
        return state

    def get(self, state_id: str) -> VariableState:
        with self._lock:
            state = self._states.get(state_id)
        if state is None:
            raise UnknownState(state_id)
        return state

    def read(self, state_id: str, names: list[str]) -> dict[str, np.ndarray]:
        """Copies of the variables `names` (all when empty), after any step in flight on the state."""
        state = self.get(state_id)
        with state.lock:
            self._check_live(state)
            state.check_intact()
            unknown = sorted(set(names) - state.variables.keys())
            if unknown:
                raise InvalidRequest(f"variable {unknown[0]!r} is not in state {state_id[:6]}…; it holds "
                                     f"{sorted(state.variables)}", variable=unknown[0])
            # A copy on the device first: a host view of the state's own buffer would keep the next step from
            # donating it.
            return {n: np.asarray(state.variables[n].copy()) for n in (names or state.variables)}

    def delete(self, state_id: str) -> int:
        """Frees the state after any step in flight on it; the bytes freed."""
        state = self.get(state_id)
        with state.lock:
            self._check_live(state)
            state.deleted = True
            state.variables = {}
        self._drop(state)
        return state.nbytes

    def _drop(self, state: VariableState) -> None:
        with self._lock:
            if self._states.pop(state.id, None) is not None:
                self._bytes -= state.nbytes
                self.budget.credit(state.device.name, STATES, state.nbytes)

    @staticmethod
    def _check_live(state: VariableState) -> None:
        """A state deleted while a call waited for its lock is gone for that call too."""
        if state.deleted:
            raise UnknownState(state.id)

    @contextlib.contextmanager
    def stepping(self, state_id: str) -> Iterator[VariableState]:
        """The state, held for one step: a second step on it waits; NOT_FOUND when it is gone."""
        state = self.get(state_id)
        with state.lock:
            self._check_live(state)
            yield state

    def totals(self) -> tuple[int, int]:
        """(states, bytes of their variables)."""
        with self._lock:
            return len(self._states), self._bytes

    def states(self) -> list[VariableState]:
        with self._lock:
            return list(self._states.values())

    def close(self) -> None:
        for state in self.states():
            self._drop(state)
