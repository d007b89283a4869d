"""A Compile by digest: the graph named by its digest (checked against the limits first, then put together from
the tiers' blobs: cache/graphs.py), and the record of its binding (cache/bindings.py) that lets the next such
Compile bind without the graph."""
from __future__ import annotations

import numpy as np
from xlacs import dtypes

from xlacs_server.cache import graphs
from xlacs_server.cache.bindings import Binding, BindingRecords
from xlacs_server.cache.blobs import Blobs
from xlacs_server.config import Settings
from xlacs_server.digest import Digest
from xlacs_server.errors import LimitExceeded
from xlacs_server.execute.executable import LoadedExecutable
from xlacs_server.pipeline.request import CompileSpec
from xlacs_server.tensor_sig import TensorSig


def check_graph_limits(spec: CompileSpec, settings: Settings) -> None:
    """LimitExceeded for a Compile by digest whose graph or manifest is over the limits, before any tier is
    looked in."""
    if spec.graph_digest.size > settings.max_graph_bytes:
        raise LimitExceeded(f"graph_digest names a graph of {spec.graph_digest.size} bytes", "max_graph_bytes",
                            settings.max_graph_bytes)
    if spec.graph_manifest is not None and len(spec.graph_manifest.cuts) > settings.max_graph_nodes:
        raise LimitExceeded(f"graph_manifest has {len(spec.graph_manifest.cuts)} cuts", "max_graph_nodes",
                            settings.max_graph_nodes)


def graph_def(blobs: Blobs, spec: CompileSpec) -> bytes:
    """The GraphDef of a Compile by digest: its bytes if sent (checked and kept), else put together from the
    tiers' blobs (cache/graphs.py; NOT_FOUND with MissingBlobs for what they lack)."""
    if spec.graph_def:
        graphs.register(blobs, spec.graph_digest, spec.graph_def, spec.graph_manifest)
        return spec.graph_def
    return graphs.resolve(blobs, spec.graph_digest, spec.graph_manifest)


def binding_ingredients(spec: CompileSpec, setting_ingredients: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """What a Compile by digest's binding depends on, named: its binding record's name (cache/bindings.py)."""
    return [("graph_digest", str(spec.graph_digest)), ("feeds", repr(spec.feeds)),
            ("fetches", repr(spec.fetches)), ("graph_name", spec.graph_name), *setting_ingredients]


def keep_record(blobs: Blobs, records: BindingRecords, record: str, loaded: LoadedExecutable,
                values: list[np.ndarray], weight_blobs: list[Digest]) -> None:
    """The binding's record, and a blob of each weight's bytes that no tier holds (one not cut out of the
    graph by its manifest: under its cut size, or written as a list of values)."""
    missing = set(blobs.missing(weight_blobs))
    for value, blob in zip(values, weight_blobs):
        if blob in missing:
            blobs.put(blob, bytes(dtypes.byte_view(value)))
            missing.discard(blob)
    weights = [(TensorSig("", v.dtype, v.shape), blob) for v, blob in zip(values, weight_blobs)]
    records.put(record, Binding(loaded.executable.key, loaded.inputs, loaded.outputs, weights))
