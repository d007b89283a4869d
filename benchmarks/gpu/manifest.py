"""The prepared folder's index (manifest.json), read on both machines: each graph's skeleton, signature, weight
scales and batch sizes, the SavedModel, the wheels; and the inputs, which both machines draw from the same names."""
from __future__ import annotations

import dataclasses
import json
import pathlib

import numpy as np

from benchmarks.gpu import weights

MANIFEST = "manifest.json"


@dataclasses.dataclass
class GraphEntry:
    name: str
    feeds: dict[str, tuple[str, tuple[int, ...]]]  # name -> (dtype, shape with -1 for the batch)
    fetches: list[str]
    scales: dict[str, float]  # the regenerated constants (weights.py)
    batches: list[int]
    vocabulary: int = 0
    torchvision: str = ""

    def feeds_at(self, batch: int) -> dict[str, tuple[str, tuple[int, ...]]]:
        return {name: (dtype, tuple(batch if d < 0 else d for d in shape)) for name, (dtype, shape) in
                self.feeds.items()}

    def inputs(self, batch: int) -> list[np.ndarray]:
        return [draw(f"input/{self.name}/{name}/{batch}", np.dtype(dtype), shape, self.vocabulary)
                for name, (dtype, shape) in self.feeds_at(batch).items()]

    def graph_def(self, folder: pathlib.Path) -> bytes:
        return weights.fill((folder / "graphs" / f"{self.name}.pb").read_bytes(), self.scales)

    def expected(self, folder: pathlib.Path) -> list[np.ndarray]:
        """TensorFlow's outputs at the first batch size, in fetch order."""
        with np.load(folder / "expected" / f"{self.name}.npz", allow_pickle=False) as saved:
            return [saved[str(i)] for i in range(len(self.fetches))]


def draw(name: str, dtype: np.dtype, shape: tuple[int, ...], vocabulary: int = 0) -> np.ndarray:
    """An input: uniform in [-1, 1), or token ids below `vocabulary` for an int32 feed."""
    if dtype == np.int32:
        return weights.token_ids(name, shape, vocabulary)
    return weights.uniform(name, shape, 1.0).astype(dtype)


@dataclasses.dataclass
class Manifest:
    graphs: list[GraphEntry]
    saved_model_batches: list[int]
    wheels: list[str]

    def write(self, folder: pathlib.Path) -> None:
        (folder / MANIFEST).write_text(json.dumps(dataclasses.asdict(self), indent=1))

    @classmethod
    def read(cls, folder: pathlib.Path) -> "Manifest":
        raw = json.loads((folder / MANIFEST).read_text())
        graphs = [GraphEntry(**{**g, "feeds": {k: (d, tuple(s)) for k, (d, s) in g["feeds"].items()}})
                  for g in raw.pop("graphs")]
        return cls(graphs, **raw)


def saved_model_input(batch: int) -> np.ndarray:
    return draw(f"input/SavedModel/image/{batch}", np.dtype(np.float32), (batch, 32, 32, 3))
