"""What a lowering rule sees besides its operands: the node, the platform, and helpers."""
from __future__ import annotations

import dataclasses

import numpy as np

from xlacs_server.graph.ir import Node


def is_constant(value) -> bool:
    return isinstance(value, np.ndarray)


@dataclasses.dataclass
class LoweringContext:
    node: Node
    platform: str
    engine: object  # the Lowerer running this node; control-flow rules use it to lower function bodies

    @property
    def name(self) -> str:
        return self.node.name
