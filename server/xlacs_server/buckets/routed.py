"""An Execute as every caller runs it (xlacs.v1's Execute, a served model's inference): routed to its bucket's
executable when it has unknown dims, then run in an execute slot."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from xlacs_server.errors import InvalidRequest

if TYPE_CHECKING:
    from xlacs_server.buckets.dynamic import DynamicExecutables
    from xlacs_server.execute.executable import RunTimes
    from xlacs_server.gates import Call
    from xlacs_server.pipeline.request import CompileResult, CompileSpec


def execute_routed(dynamic: DynamicExecutables, call: Call, executable_id: str, inputs: dict,
                   compile: Callable[[CompileSpec], CompileResult], keep: dict[str, float] | None = None,
                   state_id: str = "", times: RunTimes | None = None):
    """(executable, outputs, execute_ms), timed on its slot of the execute gate (`call`): execute_ms leaves out the
    wait for one. An executable with unknown dims runs its bucket's, which `compile(spec)` makes first if this
    daemon lacks it, without an execute slot. `times` gets where the run's time went (service.execute)."""
    if state_id and dynamic.get(executable_id) is not None:
        raise InvalidRequest(f"executable {executable_id} has feeds of unknown dims: a variable state (state_id) "
                             "runs only with an executable of static shapes; compile the training step for one")
    route = dynamic.route(executable_id, inputs, compile)
    if keep and route.executable_id != executable_id:
        raise InvalidRequest(f"executable {executable_id} has feeds of unknown dims, whose outputs are padded on "
                             "the device: it keeps none (OutputRequest.keep); keep those of a static one")
    with call.slot():
        start = time.perf_counter()
        executable, outputs = dynamic.service.execute(route.executable_id, route.inputs, call.remaining(), keep,
                                                     state_id, times)
        return executable, route.outputs(outputs), (time.perf_counter() - start) * 1e3
