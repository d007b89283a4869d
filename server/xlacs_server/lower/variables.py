"""Resource variables while a program is traced. The compile unit binds each variable a graph reaches as a program
input (unit/variables.py); during the lowering it is a VariableRef, whose value Assign* ops replace."""
from __future__ import annotations

import dataclasses

from xlacs_server.lower.checks import InvalidArgument, Unimplemented


@dataclasses.dataclass
class VariableRef:
    """A variable while a program is traced: its current value; Assign* ops replace it in graph order."""
    name: str
    value: object
    assigned: bool = False

    def assign(self, value) -> None:
        """A value of another dtype is the graph's fault; of another shape, xlacs' limit (TF variables may change
        shape, XLA program outputs cannot)."""
        if value.dtype != self.value.dtype or tuple(value.shape) != tuple(self.value.shape):
            error = InvalidArgument if value.dtype != self.value.dtype else Unimplemented
            raise error(f"variable {self.name!r} holds {self.value.dtype}{list(self.value.shape)}; cannot assign "
                        f"{value.dtype}{list(value.shape)}")
        self.value = value
        self.assigned = True


def variable_name(node) -> str:
    """The name a variable goes by: a VarHandleOp's shared_name (else its node name), a resource placeholder's
    node name."""
    return node.attrs["shared_name"] or node.name if node.op == "VarHandleOp" else node.name

