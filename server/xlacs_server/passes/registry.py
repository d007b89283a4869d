"""The pass registry: each grouping runs its phases in ascending order, and the passes of one phase in
registration order. The passes' source is in the cache key (cache_key.code_identity)."""
from __future__ import annotations

import dataclasses
import enum
import time
from typing import Callable

from xlacs.v1 import xlacs_pb2
from xlacs_server.graph.ir import Graph


class Grouping(enum.IntEnum):
    """When a pass runs, in this order."""
    POST_IMPORT = 0  # shape the compile unit: prune to the fetches, inline, functionalize control flow
    OPTIMIZATION = 1  # simplify: identities, constant folding, CSE, DCE
    PRE_LOWERING = 2  # prepare for XLA: shape inference, platform rewrites, diagnostics


@dataclasses.dataclass(frozen=True)
class Pass:
    name: str
    grouping: Grouping
    phase: int
    run: Callable[[Graph], Graph]


# What one pass did to the graph in one compile (its time, the node count before and after) is the API's own
# message, protos/xlacs/v1/xlacs.proto's PassRecord: the RPCs send it, the dashboard's model and the cache entry's
# metadata take its fields (record_fields), so its shape is written down once.
PassRecord = xlacs_pb2.PassRecord


def record_fields(record: PassRecord) -> dict:
    """The record's fields by name, zeros included, in their Python types (JSON for the cache and the dashboard)."""
    return {field.name: getattr(record, field.name) for field in record.DESCRIPTOR.fields}


_PASSES: list[Pass] = []


def register_pass(grouping: Grouping, phase: int):
    def decorate(fn: Callable[[Graph], Graph]) -> Callable[[Graph], Graph]:
        if any(p.name == fn.__name__ for p in _PASSES):
            raise RuntimeError(f"pass {fn.__name__} is registered twice")
        _PASSES.append(Pass(fn.__name__, grouping, phase, fn))
        return fn
    return decorate


def pipeline() -> list[Pass]:
    """The passes in run order (sorted() is stable, so registration order holds within a phase)."""
    return sorted(_PASSES, key=lambda p: (p.grouping, p.phase))


def run_pipeline(graph: Graph, dump: Callable[[str, Graph], None] | None = None) -> tuple[Graph, list[PassRecord]]:
    """Runs every pass; `dump(label, graph)` sees the graph after each one."""
    records = []
    for index, p in enumerate(pipeline()):
        before = len(graph.nodes)
        start = time.perf_counter()
        graph = p.run(graph)
        ms = (time.perf_counter() - start) * 1e3
        records.append(PassRecord(name=p.name, grouping=p.grouping.name, phase=p.phase, ms=ms, nodes_before=before,
                                  nodes_after=len(graph.nodes)))
        if dump is not None:
            dump(f"{index:02d}_{p.name}", graph)
    return graph, records
