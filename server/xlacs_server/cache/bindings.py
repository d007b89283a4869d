"""Binding records (docs/cache.md, "Binding records"): how a Compile by digest bound, kept in the blob stores so
that a replica sharing them binds the same graph, signature, device kind and settings again without resolving or
parsing the graph: the executable's cache key, the signature, and each lifted weight's dtype, shape and blob.

A record decides which executable and which weights run, so it is signed as executable entries are (the cache
secret's HMAC over its name and bytes) and kept under the secret's namespace; one that does not check is a
rejected miss, deleted. The weights' blobs are checked by their digests as every blob is (cache/blobs.py)."""
from __future__ import annotations

import dataclasses
import logging

import numpy as np
from google.protobuf.message import DecodeError
from xlacs import dtypes
from xlacs.v1 import cache_entries_pb2, xlacs_pb2

from xlacs_server.cache.blobs import Blobs
from xlacs_server.cache.entry import signed, verified
from xlacs_server.cache.secret import secret_id
from xlacs_server.compile.cache_key import cache_key
from xlacs_server.digest import Digest, checked_digest
from xlacs_server.errors import InvalidRequest
from xlacs_server.tensor_sig import TensorSig

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Binding:
    executable_key: str
    inputs: list[TensorSig]  # the feeds, then the variables
    outputs: list[TensorSig]  # the fetches, then the assigned variables
    weights: list[tuple[TensorSig, Digest]]  # each lifted weight (unnamed) in bind order, and its bytes' blob


class BindingRecords:
    """Binding records in `blobs`' tiers, signed with `secret`."""

    def __init__(self, blobs: Blobs, secret: bytes):
        self.blobs = blobs
        self.secret = secret
        self.namespace = secret_id(secret)

    def name(self, ingredients: list[tuple[str, str]]) -> str:
        """The record's name: everything the binding depends on, named and hashed as a cache key is."""
        return f"binding.{self.namespace}.{cache_key(ingredients)}"

    def get(self, name: str) -> Binding | None:
        data = self.blobs.get_record(name, lambda data: self._decoded(name, data) is not None)
        return None if data is None else self._decoded(name, data)

    def put(self, name: str, binding: Binding) -> None:
        """Keeps the record, unless a signature's dtype has no TF DataType (a string feed): then there is none
        and such a Compile by digest resolves its graph each time it misses the in-process map."""
        try:
            record = cache_entries_pb2.BindingRecord(
                executable_key=binding.executable_key, inputs=[_spec(s) for s in binding.inputs],
                outputs=[_spec(s) for s in binding.outputs], weights=bound_weights(binding.weights))
        except dtypes.UnsupportedDType as e:
            log.debug("no binding record for %s: %s", binding.executable_key, e)
            return
        self.blobs.put_record(name, signed(self.secret, name, record.SerializeToString(deterministic=True)))

    def weights(self, binding: Binding, indices: list[int]) -> list[np.ndarray] | None:
        """The lifted weights at `indices`, or None if a tier lacks one (blob_arrays)."""
        return blob_arrays(self.blobs, [binding.weights[i] for i in indices])

    def _decoded(self, name: str, data: bytes) -> Binding | None:
        """The record if its MAC checks and it holds together, else None (logged)."""
        record = verified(self.secret, name, data)
        if record is None:
            log.warning("binding record %s: the HMAC does not match (written under another secret, or altered)",
                        name)
            return None
        try:
            record = cache_entries_pb2.BindingRecord.FromString(record)
            return Binding(record.executable_key, [_sig(s) for s in record.inputs],
                           [_sig(s) for s in record.outputs], read_bound_weights(record.weights))
        except (DecodeError, InvalidRequest, ValueError) as e:  # ValueError: an unsupported dtype too
            log.warning("binding record %s is malformed: %s", name, e)
            return None


def bound_weights(weights: list[tuple[TensorSig, Digest]]) -> list[cache_entries_pb2.BoundWeight]:
    """Weights as a record holds them: each one's dtype and shape, and its bytes' blob."""
    return [cache_entries_pb2.BoundWeight(spec=_spec(s), blob=xlacs_pb2.Digest(hash=blob.hash, size_bytes=blob.size))
            for s, blob in weights]


def read_bound_weights(weights) -> list[tuple[TensorSig, Digest]]:
    """The weights of a record whose MAC checked; InvalidRequest or ValueError when they do not hold together."""
    read = [(_sig(w.spec), checked_digest(w.blob, "a weight's blob")) for w in weights]
    for sig, blob in read:
        if sig.nbytes != blob.size:
            raise ValueError(f"a {sig} weight in a blob of {blob.size} bytes")
    return read


def blob_arrays(blobs: Blobs, weights: list[tuple[TensorSig, Digest]]) -> list[np.ndarray] | None:
    """Weights as read-only views of their blobs' bytes (each hashed as every blob from a shared tier is), or None
    if a tier lacks one."""
    values = []
    for sig, blob in weights:
        data = blobs.get(blob)
        if data is None:
            return None
        values.append(np.frombuffer(data, sig.dtype).reshape(sig.shape))
    return values


def _spec(sig: TensorSig) -> xlacs_pb2.TensorSpec:
    return xlacs_pb2.TensorSpec(name=sig.name, dtype=dtypes.from_numpy(sig.dtype), shape=sig.shape)


def _sig(spec: xlacs_pb2.TensorSpec) -> TensorSig:
    return TensorSig(spec.name, dtypes.to_numpy(spec.dtype), tuple(spec.shape))
