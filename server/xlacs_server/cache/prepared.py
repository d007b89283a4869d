"""Prepared weights in the tiers (docs/cache.md, "Prepared weights"): the prepare program's outputs for an executable
and a weight set, kept as blobs beside the lifted weights' own, and a signed record that names them, so that a
replica binding the same executable to the same weights reads them instead of running the prepare program again.

The record is named by the executable's cache key and the weights' digest (what the outputs are a function of) and
signed as binding records are (the cache secret's HMAC over its name and bytes), so one that does not check is a
rejected miss, deleted; its blobs are checked by their digests as every blob is (cache/blobs.py). A missing or
refused record or blob is a miss: the prepare program runs, and its outputs are kept again."""
from __future__ import annotations

import logging
from typing import Iterable

import numpy as np
from google.protobuf.message import DecodeError
from xlacs import dtypes
from xlacs.v1 import cache_entries_pb2

from xlacs_server.cache.bindings import blob_arrays, bound_weights, read_bound_weights
from xlacs_server.cache.blobs import Blobs
from xlacs_server.cache.entry import signed, verified
from xlacs_server.cache.secret import secret_id
from xlacs_server.digest import digest_of
from xlacs_server.errors import InvalidRequest
from xlacs_server.tensor_sig import TensorSig

log = logging.getLogger(__name__)


class PreparedWeights:
    """Prepared weights in `blobs`' tiers, their records signed with `secret`; a set over `max_bytes` is not
    kept (cache_max_entry_bytes, the bound of an executable's entry)."""

    def __init__(self, blobs: Blobs, secret: bytes, max_bytes: int):
        self.blobs = blobs
        self.secret = secret
        self.max_bytes = max_bytes
        self.namespace = secret_id(secret)

    def get(self, name: str, sigs: list[TensorSig]) -> list[np.ndarray] | None:
        """The prepared weights kept under `name` (an executable's key and a weights digest), whose types are
        `sigs`, as read-only arrays; None when a tier lacks the record or a blob."""
        record = f"prepared.{self.namespace}.{name}"
        data = self.blobs.get_record(record, lambda data: self._decoded(record, data, sigs) is not None)
        return None if data is None else blob_arrays(self.blobs, self._decoded(record, data, sigs))

    def put(self, name: str, sigs: list[TensorSig], values: Iterable[np.ndarray]) -> None:
        """Keeps the prepared weights under `name`, whose types are `sigs`: each one's bytes as a blob (unless a
        tier has it), then the record. `values` gives them one at a time, and none is copied but into the tiers
        that keep it."""
        if sum(s.nbytes for s in sigs) > self.max_bytes:
            log.info("prepared weights %s take over %d bytes: not kept", name, self.max_bytes)
            return
        weights = []
        for sig, value in zip(sigs, values):
            view = dtypes.byte_view(value)
            digest = digest_of(view)
            if self.blobs.missing([digest]):
                self.blobs.put(digest, view)
            weights.append((TensorSig("", sig.dtype, sig.shape), digest))
        record = f"prepared.{self.namespace}.{name}"
        data = cache_entries_pb2.PreparedRecord(weights=bound_weights(weights))
        self.blobs.put_record(record, signed(self.secret, record, data.SerializeToString(deterministic=True)))

    def _decoded(self, record: str, data: bytes, sigs: list[TensorSig]):
        """The record's weights if its MAC checks and they are of the types `sigs`, else None (logged)."""
        body = verified(self.secret, record, data)
        if body is None:
            log.warning("%s: the HMAC does not match (written under another secret, or altered)", record)
            return None
        try:
            weights = read_bound_weights(cache_entries_pb2.PreparedRecord.FromString(body).weights)
        except (DecodeError, InvalidRequest, ValueError) as e:
            log.warning("%s is malformed: %s", record, e)
            return None
        if [(s.dtype, tuple(s.shape)) for s, _ in weights] != [(s.dtype, tuple(s.shape)) for s in sigs]:
            log.warning("%s names weights of other types than its program's outputs", record)
            return None
        return weights
