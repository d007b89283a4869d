"""Errors of the protocol's REST endpoints: a typed error becomes the HTTP status of its gRPC code and the protocol's
error object {"error": message}; anything else is a bug of xlacs, 500 with a request id that is also in the log
(with the traceback), as the gRPC transport does (rpc/errors.py). The daemon's errors page lists them too."""
from __future__ import annotations

import logging
import time
import uuid

import grpc
from fastapi.responses import JSONResponse

from xlacs_server.errors import XlacsError

log = logging.getLogger(__name__)

HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499,  # the client went away: nobody reads it, but the log and the errors page do
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}


def error_response(error: Exception, endpoint: str, counters) -> JSONResponse:
    """The protocol's error object for `error` raised by `endpoint`; recorded in the daemon's counters."""
    request_id = uuid.uuid4().hex[:16]
    if isinstance(error, XlacsError) and error.code != grpc.StatusCode.INTERNAL:
        code, message = error.code, str(error)
        log.info("request %s (%s): %s %s", request_id, endpoint, code.name, message)
    else:
        log.error("request %s (%s) failed", request_id, endpoint, exc_info=error)
        code = grpc.StatusCode.INTERNAL
        what = f": {error}" if isinstance(error, XlacsError) else ""
        message = f"internal error in {endpoint}{what}; request id {request_id} (see the server log)"
    counters.add(errors=1)
    counters.recent_errors.appendleft({"time": time.time(), "request_id": request_id, "method": endpoint,
                                       "code": code.name, "message": message[:2000]})
    return JSONResponse({"error": message}, status_code=HTTP_STATUS.get(code, 500))
