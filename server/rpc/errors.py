"""The one place where exceptions become gRPC statuses."""
import logging
import time
import uuid

import grpc

from xlacs_server import metrics
from xlacs_server.errors import XlacsError

log = logging.getLogger(__name__)


class ErrorInterceptor(grpc.ServerInterceptor):
    """Typed errors abort with their own status; anything else is INTERNAL with a request id in the log."""

    def __init__(self, counters):
        self.counters = counters

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = details.method.rsplit("/", 1)[-1]
        inner = handler.unary_unary

        def guarded(request, context):
            self.counters.requests += 1
            try:
                return inner(request, context)
            except XlacsError as e:
                self._record(method, e.code, str(e))
                context.abort(e.code, str(e))
            except Exception:
                request_id = uuid.uuid4().hex[:16]
                log.exception("request %s (%s) failed", request_id, method)
                message = f"internal error in {method}; request id {request_id} (see the server log)"
                self._record(method, grpc.StatusCode.INTERNAL, message, request_id)
                context.abort(grpc.StatusCode.INTERNAL, message)

        return grpc.unary_unary_rpc_method_handler(guarded, request_deserializer=handler.request_deserializer,
                                                   response_serializer=handler.response_serializer)

    def _record(self, method: str, code: grpc.StatusCode, message: str, request_id: str = "") -> None:
        metrics.RPC_ERRORS.labels(method, code.name).inc()
        self.counters.errors += 1
        self.counters.recent_errors.appendleft(
            {"time": time.time(), "request_id": request_id or uuid.uuid4().hex[:16], "method": method,
             "code": code.name, "message": message[:2000]})
