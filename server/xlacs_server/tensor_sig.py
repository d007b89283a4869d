"""TensorSig: a named tensor's dtype and static shape. The compile unit's inputs, a program's outputs and lifted
parameters, an executable's signature and a cache entry's metadata all are lists of them, so the type lives below
the stages (unit/, compile/, execute/, cache/) that share it."""
from __future__ import annotations

import dataclasses
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class TensorSig:
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize

    def __str__(self) -> str:
        return f"{self.dtype}{list(self.shape)}"
