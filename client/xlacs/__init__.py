"""xlacs client: compile TensorFlow graphs on an xlacs daemon and run them with numpy arrays.

Layers, each importing only those after it (pyproject.toml's "client-layers"; `|` siblings import none of each other):
cli; client; local | resident | shared_memory | states | upload | streaming | graph_source | freeze | auth;
saved_model | manifest | tensors; connection | errors | digests | dtypes | wire; v1 (the generated protos)."""
from xlacs.auth import tls_credentials
from xlacs.client import Client, Executable
from xlacs.errors import ErrorDetails, error_details
from xlacs.freeze import FrozenGraph, UnfrozenGraph, freeze, unfrozen
from xlacs.resident import ResidentTensor
from xlacs.shared_memory import SharedMemory
from xlacs.states import State

__all__ = ["Client", "ErrorDetails", "Executable", "error_details", "FrozenGraph", "freeze", "ResidentTensor",
           "SharedMemory", "State", "tls_credentials", "UnfrozenGraph", "unfrozen"]
