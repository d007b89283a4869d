"""The one place where exceptions become gRPC statuses, for every kind of handler (unary and streaming).

A status carries google.rpc error details in its trailers (`grpc-status-details-bin`): the typed error's own
(ErrorInfo, BadRequest, QuotaFailure) plus a RequestInfo with the request id, so clients act without parsing
the message.
"""
import functools
import logging
import time
import uuid

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from xlacs_server import metrics
from xlacs_server.errors import MissingBlobs, XlacsError

log = logging.getLogger(__name__)

# Longer messages are cut: a status echoes request values, and gRPC trailers have a size limit.
MAX_MESSAGE_CHARS = 4000

_HANDLER_KINDS = {  # handler attribute -> the constructor of a handler of that kind
    "unary_unary": grpc.unary_unary_rpc_method_handler,
    "unary_stream": grpc.unary_stream_rpc_method_handler,
    "stream_unary": grpc.stream_unary_rpc_method_handler,
    "stream_stream": grpc.stream_stream_rpc_method_handler,
}


class ErrorInterceptor(grpc.ServerInterceptor):
    """Typed errors abort with their own status; anything else is INTERNAL. Every error status has a request
    id, also in the log (with the traceback for INTERNAL)."""

    def __init__(self, counters):
        self.counters = counters

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None:
            return handler
        method = details.method.rsplit("/", 1)[-1]
        for kind, make in _HANDLER_KINDS.items():
            inner = getattr(handler, kind)
            if inner is not None:
                guard = self._guard_stream if kind.endswith("_stream") else self._guard
                return make(guard(method, inner), request_deserializer=handler.request_deserializer,
                            response_serializer=handler.response_serializer)
        return handler

    def _guard(self, method: str, inner):
        @functools.wraps(inner)
        def guarded(request, context):
            self.counters.add(requests=1)
            try:
                return inner(request, context)
            except Exception as e:  # noqa: BLE001  (every exception becomes a status)
                self._abort(method, context, e)
        return guarded

    def _guard_stream(self, method: str, inner):
        if getattr(inner, "experimental_non_blocking", False):
            return self._guard_non_blocking(method, inner)
        # Not the handler's attributes (updated=()): a generator must not be marked experimental_non_blocking.
        @functools.wraps(inner, updated=())
        def guarded(request, context):
            self.counters.add(requests=1)
            try:
                yield from inner(request, context)
            except Exception as e:  # noqa: BLE001
                self._abort(method, context, e)
        return guarded

    def _guard_non_blocking(self, method: str, inner):
        """A response-streaming handler marked experimental_non_blocking (OpenSession, the health service's Watch)
        sends its responses through a callback and returns at once: its call stays open without holding one of
        the server's threads, and does not count against maximum_concurrent_rpcs."""
        def guarded(request, context, send_response_callback):
            self.counters.add(requests=1)
            try:
                inner(request, context, send_response_callback)
            except Exception as e:  # noqa: BLE001
                self._abort(method, context, e)
        guarded.experimental_non_blocking = True
        return guarded

    def _abort(self, method: str, context, error: Exception):
        request_id = uuid.uuid4().hex[:16]
        if isinstance(error, XlacsError) and error.code != grpc.StatusCode.INTERNAL:
            code, message, details = error.code, str(error), error.details()
            log.info("request %s (%s): %s %s", request_id, method, code.name, message[:MAX_MESSAGE_CHARS])
        else:
            log.error("request %s (%s) failed", request_id, method, exc_info=error)
            code = grpc.StatusCode.INTERNAL
            what = f": {error}" if isinstance(error, XlacsError) else ""
            message = f"internal error in {method}{what}; request id {request_id} (see the server log)"
            details = error.details() if isinstance(error, XlacsError) else []
        message = _truncated(message)
        if not isinstance(error, MissingBlobs):  # a step of Compile by digest (the client uploads), not a failure
            self._record(method, code, message, request_id)
        status = status_pb2.Status(code=code.value[0], message=message, details=[
            _packed(d) for d in [*details, error_details_pb2.RequestInfo(request_id=request_id)]])
        context.abort_with_status(rpc_status.to_status(status))

    def _record(self, method: str, code: grpc.StatusCode, message: str, request_id: str) -> None:
        metrics.RPC_ERRORS.labels(method, code.name).inc()
        self.counters.add(errors=1)
        self.counters.recent_errors.appendleft(
            {"time": time.time(), "request_id": request_id, "method": method, "code": code.name,
             "message": message[:2000]})


def _truncated(message: str) -> str:
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return f"{message[:MAX_MESSAGE_CHARS]}... ({len(message) - MAX_MESSAGE_CHARS} more characters)"


def _packed(detail) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(detail)
    return packed
