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
    scope: str = ""  # "function/" when the node is in a function body

    @property
    def name(self) -> str:
        """The node's name for messages, qualified by the function it is in."""
        return self.scope + self.node.name

