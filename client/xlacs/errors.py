"""The machine-readable part of an xlacs error status: google.rpc details decoded from the trailers."""
from __future__ import annotations

import dataclasses

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from xlacs.v1 import xlacs_pb2


@dataclasses.dataclass(frozen=True)
class ErrorDetails:
    reason: str = ""  # e.g. INVALID_NODE, UNSUPPORTED_NODE, LOWERING_ERROR, LIMIT_EXCEEDED
    metadata: dict[str, str] = dataclasses.field(default_factory=dict)  # node, op, attr, input, setting, ...
    field_violations: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (field, description)
    request_id: str = ""  # also in the daemon's log
    # A NOT_FOUND Compile by digest: the blobs the daemon lacks (xlacs.v1.MissingBlobs; docs/cache.md)
    missing_blobs: list[xlacs_pb2.Digest] = dataclasses.field(default_factory=list)


def error_details(error: grpc.RpcError) -> ErrorDetails:
    """The details of a failed call to an xlacs daemon; empty when the status carries none."""
    status = rpc_status.from_call(error)
    if status is None:
        return ErrorDetails()
    found: dict = {"metadata": {}, "field_violations": [], "missing_blobs": []}
    for packed in status.details:
        for kind in (error_details_pb2.ErrorInfo, error_details_pb2.BadRequest, error_details_pb2.RequestInfo,
                     xlacs_pb2.MissingBlobs):
            if packed.Is(kind.DESCRIPTOR):
                detail = kind()
                packed.Unpack(detail)
                if isinstance(detail, error_details_pb2.ErrorInfo):
                    found.update(reason=detail.reason, metadata=dict(detail.metadata))
                elif isinstance(detail, error_details_pb2.BadRequest):
                    found["field_violations"] += [(v.field, v.description) for v in detail.field_violations]
                elif isinstance(detail, xlacs_pb2.MissingBlobs):
                    found["missing_blobs"] += detail.digests
                else:
                    found["request_id"] = detail.request_id
    return ErrorDetails(**found)
