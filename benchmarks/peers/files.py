"""A graph as every peer process reads it: a directory holding the frozen GraphDef (graph.pb), its signature
(signature.json: feeds with dtype and shape, fetches) and the inputs in feed order (input-<i>.npy). Files, not
pickles: a peer process loads exactly the bytes and arrays the others do."""
from __future__ import annotations

import dataclasses
import json
import pathlib

import numpy as np


@dataclasses.dataclass(frozen=True)
class GraphFiles:
    directory: pathlib.Path

    @property
    def graph_path(self) -> pathlib.Path:
        return self.directory / "graph.pb"

    @property
    def graph_def(self) -> bytes:
        return self.graph_path.read_bytes()

    def signature(self) -> tuple[dict[str, tuple[np.dtype, tuple[int, ...]]], list[str]]:
        """(feed name -> (dtype, shape) in feed order, fetch names)."""
        signature = json.loads((self.directory / "signature.json").read_text())
        feeds = {name: (np.dtype(dtype), tuple(shape)) for name, dtype, shape in signature["feeds"]}
        return feeds, signature["fetches"]

    def inputs(self) -> list[np.ndarray]:
        feeds, _ = self.signature()
        return [np.load(self.directory / f"input-{i}.npy") for i in range(len(feeds))]


def write_graph_files(directory: pathlib.Path, graph_def: bytes, feeds: dict[str, tuple], fetches: list[str],
                      inputs: list[np.ndarray]) -> GraphFiles:
    """Writes a graph's files into `directory` (made if absent); `feeds` maps name -> (dtype, shape)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "graph.pb").write_bytes(graph_def)
    signature = {"feeds": [[name, np.dtype(dtype).name, list(shape)] for name, (dtype, shape) in feeds.items()],
                 "fetches": list(fetches)}
    (directory / "signature.json").write_text(json.dumps(signature))
    for i, array in enumerate(inputs):
        np.save(directory / f"input-{i}.npy", array, allow_pickle=False)
    return GraphFiles(directory)
