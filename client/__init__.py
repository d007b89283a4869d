"""xlacs client: compile TensorFlow graphs on an xlacs daemon and run them with numpy arrays."""
from xlacs.auth import tls_credentials
from xlacs.client import Client, Executable
from xlacs.freeze import FrozenGraph, freeze

__all__ = ["Client", "Executable", "FrozenGraph", "freeze", "tls_credentials"]
