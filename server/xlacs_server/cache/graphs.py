"""GraphDefs by digest (docs/cache.md, Blobs). A graph's manifest names its bytes as a skeleton and cuts: the
GraphDef's bytes are the skeleton's with each cut's blob put back at its offset, in order. A manifest is used
only once the bytes it names hash to the graph's digest; a GraphDef sent whole is split by its manifest (or
kept as one blob) so that later Compiles, here or on a replica sharing the tiers, can name it by digest."""
from __future__ import annotations

from typing import NamedTuple, NoReturn

from xlacs import manifest as manifests
from xlacs.v1 import xlacs_pb2

from xlacs_server.cache.blobs import Blobs
from xlacs_server.digest import Digest, checked_digest, digest_of
from xlacs_server.errors import InvalidRequest, MissingBlobs


class Pieces(NamedTuple):
    """A manifest checked against its graph's size: the skeleton, and (offset, blob) of each cut in order."""
    skeleton: Digest
    cuts: list[tuple[int, Digest]]


def pieces(manifest: xlacs_pb2.GraphManifest, graph: Digest) -> Pieces:
    """The manifest's skeleton and cuts, or InvalidRequest naming the cut that overlaps, is out of order or
    ends past the graph, or saying that the sizes do not add up to the graph's."""
    skeleton = checked_digest(manifest.skeleton, "graph_manifest.skeleton")
    cuts, end = [], 0
    for i, cut in enumerate(manifest.cuts):
        blob = checked_digest(cut.blob, f"graph_manifest.cuts[{i}].blob")
        if cut.offset < end:
            raise InvalidRequest(f"graph_manifest.cuts[{i}] at offset {cut.offset} overlaps the cut before it or "
                                 f"is out of order: cuts go by increasing offset, and this one starts at {end} or "
                                 "later")
        end = cut.offset + blob.size
        if end > graph.size:
            raise InvalidRequest(f"graph_manifest.cuts[{i}] at offset {cut.offset} with {blob.size} bytes ends at "
                                 f"{end}, past the graph's {graph.size} bytes (graph_digest.size_bytes)")
        cuts.append((cut.offset, blob))
    total = skeleton.size + sum(blob.size for _, blob in cuts)
    if total != graph.size:
        raise InvalidRequest(f"graph_manifest: the skeleton's {skeleton.size} bytes and the {len(cuts)} cuts' "
                             f"{total - skeleton.size} add up to {total}, not the graph's {graph.size} bytes "
                             "(graph_digest.size_bytes)")
    return Pieces(skeleton, cuts)


def resolve(blobs: Blobs, graph: Digest, manifest: xlacs_pb2.GraphManifest | None) -> bytes:
    """The GraphDef's bytes, put together from the blobs of `manifest` (the request's) or of the manifest the
    tiers keep for `graph`. MissingBlobs names what the tiers lack: the graph's digest when there is no manifest
    (or the stored one does not hold, then it is dropped), else the missing blobs. A request's manifest whose
    bytes do not hash to `graph` is InvalidRequest; one that does is kept."""
    found_in = None
    if manifest is None:
        found = blobs.get_manifest(graph)
        if found is None:
            raise MissingBlobs(graph, [graph])
        manifest, found_in = found
    try:
        parts = pieces(manifest, graph)
    except InvalidRequest as e:
        if found_in is None:
            raise
        _drop(blobs, graph, found_in, str(e))
    found = {digest: blobs.find(digest) for digest in dict.fromkeys([parts.skeleton, *(b for _, b in parts.cuts)])}
    local = blobs.stores[0].tier
    missing = [digest for digest, f in found.items() if f is None]
    if missing:  # and the bad ones among those found, so that the client uploads them all at once
        raise MissingBlobs(graph, missing + _rejected(blobs, found, local))
    data = {digest: d for digest, (d, _) in found.items()}
    graph_def = manifests.join(data[parts.skeleton], [(offset, data[blob]) for offset, blob in parts.cuts])
    # This process's tier holds only checked manifests and blobs: put together from them alone, the bytes are
    # the graph's without hashing them. Otherwise the graph's hash proves every blob at once; only when it
    # fails is each blob from a shared tier hashed, to find the ones to reject.
    if found_in != local or any(tier != local for _, tier in found.values()):
        actual = digest_of(graph_def)
        if actual != graph:
            bad = _rejected(blobs, found, local)
            if bad:
                raise MissingBlobs(graph, bad)
            why = f"the bytes it names hash to {actual.hash}, not graph_digest {graph.hash}"
            if found_in is None:
                raise InvalidRequest(f"graph_manifest: {why}")
            _drop(blobs, graph, found_in, why)
        if found_in != local:
            blobs.put_manifest(graph, manifest, found_in)
    for digest, (d, tier) in found.items():
        blobs.keep(digest, d, tier)
    return graph_def


def register(blobs: Blobs, graph: Digest, graph_def: bytes, manifest: xlacs_pb2.GraphManifest | None) -> None:
    """Keeps a GraphDef sent whole with its digest: its blobs (split by `manifest`, or the whole graph as its
    skeleton) and its manifest, after checking that the bytes hash to `graph` and each piece to its digest."""
    actual = digest_of(graph_def)
    if actual != graph:
        raise InvalidRequest(f"graph_def hashes to {actual.hash} ({actual.size} bytes), not graph_digest "
                             f"{graph.hash} ({graph.size} bytes)")
    if manifest is None:
        manifest = xlacs_pb2.GraphManifest(skeleton=xlacs_pb2.Digest(hash=graph.hash, size_bytes=graph.size))
    parts = pieces(manifest, graph)
    view, skeleton, start = memoryview(graph_def), [], 0
    split = {}
    for i, (offset, blob) in enumerate(parts.cuts):
        skeleton.append(view[start:offset])
        start = offset + blob.size
        split[blob] = _checked(view[offset:start], blob, f"graph_manifest.cuts[{i}] at offset {offset}")
    skeleton.append(view[start:])
    split[parts.skeleton] = _checked(b"".join(skeleton), parts.skeleton, "graph_manifest.skeleton")
    for digest in blobs.missing(split):
        blobs.put(digest, split[digest])
    blobs.put_manifest(graph, manifest)


def _drop(blobs: Blobs, graph: Digest, found_in: str, why: str) -> NoReturn:
    """A kept manifest that does not hold is a miss: dropped, and asked for."""
    blobs.drop_manifest(graph, found_in, why)
    raise MissingBlobs(graph, [graph])


def _rejected(blobs: Blobs, found: dict[Digest, tuple[bytes, str] | None], local: str) -> list[Digest]:
    """The blobs found in a shared tier (not `local`) whose bytes do not match their digests, rejected there."""
    bad = [digest for digest, f in found.items() if f is not None and f[1] != local and digest_of(f[0]) != digest]
    for digest in bad:
        blobs.reject(digest, found[digest][1])
    return bad


def _checked(piece, digest: Digest, what: str) -> bytes:
    actual = digest_of(piece)
    if actual != digest:
        raise InvalidRequest(f"{what}: the graph_def's bytes there hash to {actual.hash}, not {digest.hash}")
    return bytes(piece)
