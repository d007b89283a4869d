"""The execute path: a loaded executable run in the daemon or in an execution worker (execute/isolation.py), on
a variable state when the call names one (execute/states.py), its outputs kept on the device when asked
(execute/resident.py); XLA running out of the device's memory meanwhile is RESOURCE_EXHAUSTED naming its budget
(execute/device_budget.py)."""
from __future__ import annotations

import time

import numpy as np

from xlacs_server import metrics
from xlacs_server.config import Settings
from xlacs_server.errors import InvalidRequest, LimitExceeded
from xlacs_server.execute.device_budget import DeviceBudget
from xlacs_server.execute.executable import Executable, LoadedExecutable, RunTimes
from xlacs_server.execute.isolation import Workers
from xlacs_server.execute.loaded import LoadedExecutables
from xlacs_server.execute.resident import ResidentTensors, kept
from xlacs_server.execute.states import VariableStates
from xlacs_server.unit.variables import INPUT_PREFIX as VARIABLE_PREFIX


class Runner:
    def __init__(self, settings: Settings, loaded: LoadedExecutables, workers: Workers, resident: ResidentTensors,
                 states: VariableStates, budget: DeviceBudget):
        self.settings = settings
        self.budget = budget
        self.loaded = loaded
        self.workers = workers
        self.resident = resident
        self.states = states

    def check_input_bytes(self, size: int) -> None:
        """LimitExceeded for inputs of `size` bytes in all, over max_input_bytes."""
        if size > self.settings.max_input_bytes:
            raise LimitExceeded(f"the inputs have {size} bytes", "max_input_bytes", self.settings.max_input_bytes)

    def execute(self, executable_id: str, inputs: dict[str, np.ndarray], client_s: float | None = None,
                keep: dict[str, float] | None = None, state_id: str = "",
                times: RunTimes | None = None) -> tuple[Executable, list]:
        """The outputs of an executable; `client_s`, the time left before the client's deadline, bounds a run
        in an execution worker as execute_deadline_s does. An input may be a resident tensor's array
        (execute/resident.py); the outputs named in `keep` (name -> time to live, 0 for the default) stay on the
        device, returned as ResidentTensors. With a variable state (execute/states.py), the variables come from it
        and the values the run assigns go back to it: the outputs are then the fetches only. `times`, when
        given, gets where the run's time went (a served model's statistics)."""
        loaded = self.loaded.get(executable_id)
        positions = frozenset(kept(loaded, keep)) if keep else frozenset()
        size = sum(a.nbytes for a in inputs.values() if isinstance(a, np.ndarray))  # not the resident ones
        self.check_input_bytes(size)
        with self.budget.allocating(loaded.executable.device.name, f"running executable {loaded.id}"):
            if not state_id:
                outputs = self._run(loaded, inputs, positions, client_s, times=times)
            else:
                outputs = self._step(loaded, inputs, positions, client_s, state_id)
            if positions:
                outputs = self.resident.keep_outputs(loaded, outputs, keep)
        return loaded.executable, outputs

    def _run(self, loaded: LoadedExecutable, inputs: dict, positions: frozenset[int], client_s: float | None,
             handed_over: bool = False, times: RunTimes | None = None) -> list:
        executable = loaded.executable
        with metrics.executing(executable.device.name):
            if executable.isolated:
                limit_s = self.settings.execute_deadline_s
                timeout_s, why = (client_s, "the client's deadline") if client_s is not None and client_s < limit_s \
                    else (limit_s, f"the server's limit execute_deadline_s={limit_s:g} s")
                start = time.perf_counter()
                outputs = self.workers.pool(executable.device).run(
                    loaded.id, lambda: (executable.serialized, [np.asarray(w) for w in loaded.weights]),
                    [np.asarray(a) for a in loaded.check_inputs(inputs)], timeout_s, why)
                if times is not None:  # a worker's run is not split: all of it counts as the program's
                    times.infer_s = time.perf_counter() - start
                return outputs
            return loaded.run(inputs, positions, handed_over, times)

    def _step(self, loaded: LoadedExecutable, inputs: dict, positions: frozenset[int], client_s: float | None,
              state_id: str) -> list:
        """A run on a variable state, holding it: its assigned variables stay on the device and replace the
        state's; the fetches are returned."""
        named = sorted(n for n in inputs if n.startswith(VARIABLE_PREFIX))
        if named:
            raise InvalidRequest(f"input {named[0]!r}: with a state (state_id), the variables come from the state; "
                                 "send only the feeds", input=named[0])
        fetches = [i for i, s in enumerate(loaded.outputs) if not s.name.startswith(VARIABLE_PREFIX)]
        kept_variables = sorted(loaded.outputs[i].name for i in positions.difference(fetches))
        if kept_variables:
            raise InvalidRequest(f"output {kept_variables[0]!r} goes to the state: read it with ReadVariables, "
                                 "keep only fetches", output=kept_variables[0])
        assigned = [s.name for s in loaded.outputs[len(fetches):]]
        with self.states.stepping(state_id) as state:
            given = {**inputs, **state.inputs_for(loaded)}
            outputs = self._run(loaded, given, positions.union(range(len(fetches), len(loaded.outputs))), client_s,
                                handed_over=True)
            state.assign(assigned, outputs[len(fetches):])
        return outputs[:len(fetches)]
