"""Variable states (docs/training.md): a graph's resource variables kept on the daemon's device between Executes. A
training step run with `state=` takes its variables from the state and leaves the values it assigns there; only
the feeds travel, and only the fetches come back."""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Mapping

import numpy as np

from xlacs import dtypes, tensors
from xlacs.connection import Connection
from xlacs.saved_model.bundle import Bundle
from xlacs.saved_model.loader import SavedModel
from xlacs.v1 import xlacs_pb2


def initial_values(source, names: Mapping[str, str] | None = None) -> dict[str, np.ndarray]:
    """The variables a state starts from, by the name the executable's input has without "variables/": `source` as
    given when a mapping; a SavedModel directory's variables by their names (SavedVariable.name, e.g.
    "dense/kernel"); otherwise a checkpoint's (TensorBundle prefix, e.g. "ckpt/model-100") numeric tensors by key.
    `names` ({state name: name in the source}) picks and renames them."""
    if isinstance(source, Mapping):
        values = {name: np.asarray(value) for name, value in source.items()}
    elif (pathlib.Path(source) / "saved_model.pb").is_file():
        model = SavedModel(source)
        nodes = model.meta_graph.object_graph_def.nodes
        values = {nodes[i].variable.name: model.variable(i) for i in model.checkpoint_keys
                  if nodes[i].HasField("variable")}
    else:
        bundle = Bundle(source)
        values = {key: bundle.tensor(key) for key, entry in bundle.entries.items() if _numeric(entry.dtype)}
    if names is None:
        return values
    missing = sorted(n for n in names.values() if n not in values)
    if missing:
        raise KeyError(f"{source} has no variable {missing[0]!r}; it has {sorted(values)}")
    return {state_name: values[name] for state_name, name in names.items()}


def _numeric(enum: int) -> bool:
    """Whether a checkpoint tensor of this dtype can be a variable: not its object graph, a string."""
    try:
        dtypes.to_numpy(enum)
    except dtypes.UnsupportedDType:
        return False
    return True


@dataclasses.dataclass
class State:
    """A variable state on the daemon: pass it as `state=` to an Executable, read its variables with read(), free
    it with delete() (or leave a `with` block). Its id is a capability: whoever holds it can read the model."""
    id: str
    variables: dict[str, tuple[np.dtype, tuple[int, ...]]]  # name -> (dtype, shape)
    nbytes: int
    client: Connection = dataclasses.field(repr=False, compare=False)  # the Client whose daemon keeps it

    def read(self, *names: str) -> dict[str, np.ndarray]:
        """The variables' current values (all of them without names), after any step in flight on the state."""
        response = self.client.stub.ReadVariables(xlacs_pb2.ReadVariablesRequest(state_id=self.id, names=names),
                                                  timeout=self.client.timeout)
        return {t.name: tensors.from_proto(t) for t in response.variables}

    def delete(self) -> int:
        """Frees the state on the daemon; the bytes freed."""
        response = self.client.stub.DeleteState(xlacs_pb2.DeleteStateRequest(state_id=self.id),
                                                timeout=self.client.timeout)
        return response.freed_bytes

    def __enter__(self) -> "State":
        return self

    def __exit__(self, *exc) -> None:
        self.delete()


def create_state(connection: Connection, source, device: str = "", names: Mapping[str, str] | None = None) -> State:
    """A state holding the variables of `source` (see initial_values) on `device` (the daemon's default when
    empty)."""
    request = xlacs_pb2.CreateStateRequest(device=device)
    for name, value in initial_values(source, names).items():
        tensors.fill(request.variables.add(), name, value)
    response = connection.stub.CreateState(request, timeout=connection.timeout)
    return State(response.state_id, {s.name: (dtypes.to_numpy(s.dtype), tuple(s.shape)) for s in response.variables},
                 response.bytes, connection)
