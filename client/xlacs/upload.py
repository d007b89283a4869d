"""Compile by digest, uploading only what the daemon lacks (docs/cache.md, "Content-addressed graphs").

A Compile names the graph by the digest of its bytes and sends none of them. A daemon that lacks the graph
answers NOT_FOUND with the missing digests in the status details (xlacs.v1.MissingBlobs). The graph's own
digest means the daemon lacks its manifest: the client splits the graph into its skeleton and weight tensors
(xlacs.manifest), asks FindMissingBlobs which of them the daemon lacks, streams those with UploadBlobs, and
compiles again with the manifest. Blobs evicted in between are named the same way and uploaded again; a
daemon that loses a blob this call has just uploaded cannot keep the graph's blobs at once (its blob tiers are
smaller than the graph), and gets the graph whole, as `graph_def` beside its digest."""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable, ContextManager

import grpc

from xlacs import digests, manifest
from xlacs.errors import error_details
from xlacs.v1 import xlacs_pb2, xlacs_pb2_grpc

# Compiles of one graph that may each find blobs missing before the client gives up: the first by digest,
# the one with the manifest, and one more after an eviction between FindMissingBlobs and that compile.
MAX_COMPILES = 4


class BlobsMissing(RuntimeError):
    """The daemon asks for blobs that are not the graph's, or keeps asking for its manifest."""


@dataclasses.dataclass
class UploadReport:
    """What a Compile sent of its graph: the blobs uploaded, and those the daemon already held (all of the
    graph, as one blob, when it knew the graph's digest). Without re-uploads, uploaded + skipped bytes are the
    graph's size. `sent_whole`: the graph went as graph_def at last (its bytes count in uploaded_bytes)."""
    uploaded_blobs: int = 0
    uploaded_bytes: int = 0
    skipped_blobs: int = 0
    skipped_bytes: int = 0
    sent_whole: bool = False


def compile_by_digest(stub: xlacs_pb2_grpc.CompilerStub, request: xlacs_pb2.CompileRequest,
                      graph: Callable[[], ContextManager[memoryview]], timeout: float | None
                      ) -> tuple[xlacs_pb2.CompileResponse, UploadReport]:
    """Compiles `request` (its graph_digest set), reading the graph's bytes with `graph()` only if the daemon
    lacks some of them. Leaves graph_manifest set in `request` when it had to send it."""
    report, graph_key = UploadReport(), digests.key(request.graph_digest)
    with contextlib.ExitStack() as opened:
        blobs: dict[tuple[str, int], memoryview] | None = None  # the graph's blobs by digest, once split
        uploaded: set[tuple[str, int]] = set()
        for _ in range(MAX_COMPILES):
            try:
                response = stub.Compile(request, timeout=timeout)
            except grpc.RpcError as e:
                missing = error_details(e).missing_blobs if e.code() == grpc.StatusCode.NOT_FOUND else []
                if not missing:
                    raise
            else:
                if blobs is None:
                    report.skipped_blobs, report.skipped_bytes = 1, request.graph_digest.size_bytes
                return response, report
            wanted = {digests.key(d): d for d in missing}
            first_split = blobs is None
            if first_split:
                data = opened.enter_context(graph())
                try:
                    parts = manifest.split(data)
                except manifest.MalformedGraphDef:
                    # Sent whole without its digest, as before content addressing: the daemon's checks say
                    # what is wrong, and it keeps none of it.
                    return _compile_whole(stub, request, data, report, timeout, named=False)
                graph_manifest, blobs = parts.manifest()
                request.graph_manifest.CopyFrom(graph_manifest)
            if graph_key in wanted:
                wanted = _find_missing(stub, request.graph_manifest, timeout)
            if first_split:
                present = [d for d in _blob_digests(request.graph_manifest) if digests.key(d) not in wanted]
                report.skipped_blobs, report.skipped_bytes = len(present), sum(d.size_bytes for d in present)
            unknown = [f"{h[:12]}…" for h, _ in wanted.keys() - blobs.keys()]
            if unknown:
                raise BlobsMissing(f"the daemon asks for blobs that are not this graph's: {', '.join(unknown)}")
            if wanted.keys() & uploaded:
                return _compile_whole(stub, request, data, report, timeout, named=True)
            _upload(stub, [(d, blobs[k]) for k, d in wanted.items()], timeout)
            uploaded |= wanted.keys()
            report.uploaded_blobs += len(wanted)
            report.uploaded_bytes += sum(d.size_bytes for d in wanted.values())
    raise BlobsMissing(f"the daemon still lacks the manifest of graph {request.graph_digest.hash[:12]}… after "
                       f"{MAX_COMPILES} compiles that sent it")


def _blob_digests(graph_manifest: xlacs_pb2.GraphManifest) -> list[xlacs_pb2.Digest]:
    """The distinct blobs a manifest names: the skeleton and each tensor (one weight may be cut twice)."""
    distinct = {digests.key(d): d for d in [graph_manifest.skeleton, *(c.blob for c in graph_manifest.cuts)]}
    return list(distinct.values())


def _find_missing(stub, graph_manifest: xlacs_pb2.GraphManifest, timeout) -> dict[tuple[str, int], xlacs_pb2.Digest]:
    response = stub.FindMissingBlobs(xlacs_pb2.FindMissingBlobsRequest(digests=_blob_digests(graph_manifest)),
                                     timeout=timeout)
    return {digests.key(d): d for d in response.missing}


def _upload(stub, blobs: list[tuple[xlacs_pb2.Digest, memoryview]], timeout) -> None:
    """Streams `blobs` in chunks (digests.blob_chunks)."""
    if blobs:
        stub.UploadBlobs(digests.blob_chunks(blobs), timeout=timeout)


def _compile_whole(stub, request, data: memoryview, report: UploadReport, timeout, named: bool):
    """`request` with the graph's bytes as graph_def. `named`: with its digest and manifest, which the daemon
    checks, keeping what its tiers can hold; else without."""
    whole = xlacs_pb2.CompileRequest()
    whole.CopyFrom(request)
    if not named:
        whole.ClearField("graph_digest")
        whole.ClearField("graph_manifest")
    whole.graph_def = bytes(data)
    report.uploaded_bytes += len(data)
    report.sent_whole = True
    return stub.Compile(whole, timeout=timeout), report
