"""What the client's features (resident tensors, states, shared memory, downloads) need of a Client: the stub of
its channel and the deadline of its calls. They take this interface, which xlacs.Client is, and not the Client
class, which is built on them."""
from __future__ import annotations

from typing import Protocol

from xlacs.v1 import xlacs_pb2_grpc


class Connection(Protocol):
    """A stub of xlacs.v1.Compiler and the timeout of its calls in seconds (None: no deadline)."""
    stub: xlacs_pb2_grpc.CompilerStub
    timeout: float | None
