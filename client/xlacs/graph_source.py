"""Where a graph's bytes come from: a .pb file, or the bytes or GraphDef message a caller passed. An Executable
keeps its source, not the bytes, and reads it again only when a daemon lacks them."""
from __future__ import annotations

import contextlib
import os
import pathlib
from typing import Iterator

from xlacs import digests
from xlacs.v1 import xlacs_pb2


class GraphChanged(ValueError):
    """The graph an executable was compiled from has changed (a rewritten file, a mutated bytearray), so it
    cannot be uploaded again under the executable's digest."""


class GraphSource:
    """A GraphDef given as a message (ours or TF's), serialized bytes, or a path to a .pb file. Bytes and
    messages are kept by reference, never copied."""

    def __init__(self, graph):
        if not isinstance(graph, (bytes, bytearray, memoryview, str, os.PathLike)) and not hasattr(
                graph, "SerializeToString"):
            raise TypeError(f"graph must be a GraphDef, bytes or a path, not {type(graph).__name__}")
        self.graph = graph

    @property
    def path(self) -> str | None:
        return os.fspath(self.graph) if isinstance(self.graph, (str, os.PathLike)) else None

    @contextlib.contextmanager
    def open(self, files: digests.FileDigests) -> Iterator[tuple[xlacs_pb2.Digest, memoryview]]:
        """(digest, bytes): a file mapped (its digest remembered by `files`), the caller's bytes as they are, or
        a message serialized (deterministically: map entries by key)."""
        if self.path is not None:
            with files.open(self.path) as opened:
                yield opened
            return
        data = self._in_memory()
        yield digests.digest(data), memoryview(data)

    def read(self) -> bytes:
        """The bytes as one bytes object, what a message's field takes (CheckGraph sends them so)."""
        return pathlib.Path(self.path).read_bytes() if self.path is not None else bytes(self._in_memory())

    def _in_memory(self):
        if isinstance(self.graph, (bytes, bytearray, memoryview)):
            return self.graph
        return self.graph.SerializeToString(deterministic=True)

    @contextlib.contextmanager
    def reopen(self, files: digests.FileDigests, expected: xlacs_pb2.Digest) -> Iterator[memoryview]:
        """The bytes again, for an upload under `expected`; GraphChanged if they no longer hash to it."""
        with self.open(files) as (digest, data):
            if digests.key(digest) != digests.key(expected):
                where = f"the file {self.path}" if self.path is not None else f"the {type(self.graph).__name__}"
                raise GraphChanged(f"{where} changed since it was compiled (sha256 {expected.hash[:12]}…, "
                                   f"now {digest.hash[:12]}…): compile it again")
            yield data
