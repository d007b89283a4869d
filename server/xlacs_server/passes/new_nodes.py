"""The nodes a rewriting pass adds to a graph's node table: named under one prefix, never over a name the graph
already has (a graph may use any name)."""
from __future__ import annotations

import numpy as np

from xlacs_server.graph.ir import Endpoint, Node


class NewNodes:
    def __init__(self, nodes: dict[str, Node], prefix: str, device: str):
        self.nodes, self.prefix, self.device = nodes, prefix, device

    def __call__(self, suffix: str, op: str, inputs: list[Endpoint], attrs: dict) -> Endpoint:
        """Adds node `prefix + suffix`; its output 0."""
        name = self.prefix + suffix
        while name in self.nodes:
            name += "_"
        self.nodes[name] = Node(name, op, inputs, [], attrs, self.device)
        return Endpoint(name)

    def const(self, suffix: str, value: np.ndarray) -> Endpoint:
        return self(suffix, "Const", [], {"value": value, "dtype": value.dtype})
