"""Request bytes that are no message of their method's request type (a length past the end, a string field that is
not UTF-8...) are INVALID_ARGUMENT saying what is wrong, for every method: grpc answers a deserializer that raises
with INTERNAL. Each method's deserializer returns Malformed instead, and its handler refuses that before the
servicer sees it, as an InvalidRequest that the error interceptor maps; a string that is not UTF-8 is named by its
field and its bytes (protobuf's own message names neither)."""
import functools

import grpc
from google.protobuf import descriptor_pool
from google.protobuf.message import DecodeError
from xlacs import wire

from xlacs_server.errors import InvalidRequest, echoed


class Malformed(str):
    """Why the bytes of a request are no message of its type."""


class MalformedRequestInterceptor(grpc.ServerInterceptor):
    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None or handler.request_deserializer is None or _request_type(details.method) is None:
            return handler
        kind = next(kind for kind in ("unary_unary", "unary_stream", "stream_unary", "stream_stream")
                    if getattr(handler, kind) is not None)
        refusing = _refusing_each if handler.request_streaming else _refusing
        return handler._replace(request_deserializer=_or_malformed(_request_type(details.method),
                                                                   handler.request_deserializer),
                                **{kind: refusing(getattr(handler, kind))})


def _parsed(received):
    """A request as the deserializer left it; InvalidRequest if it was Malformed."""
    if isinstance(received, Malformed):
        raise InvalidRequest(received)
    return received


@functools.cache
def _request_type(method: str):
    """The descriptor of the request message of `method` (/package.Service/Method); None for a service whose
    descriptors are not in protobuf's default pool, whose requests then go as grpc parses them."""
    try:
        return descriptor_pool.Default().FindMethodByName(method[1:].replace("/", ".")).input_type
    except KeyError:
        return None


def _or_malformed(message, read):
    def deserialize(data: bytes):
        try:
            return read(data)
        except (ValueError, DecodeError) as e:
            try:
                bad = wire.bad_utf8(data, message)
            except ValueError:  # its fields cannot even be walked: the parser said why
                bad = None
            why = f"{bad[0]} {echoed(bad[1])} is not valid UTF-8" if bad else str(e) or type(e).__name__
            return Malformed(f"the request is not a well-formed {message.full_name}: {why}")
    return deserialize


def _refusing(handle):
    @functools.wraps(handle)  # a non-blocking handler's mark too
    def refusing(request, *rest):  # the context, and a non-blocking handler's callback
        return handle(_parsed(request), *rest)
    return refusing


def _refusing_each(handle):
    @functools.wraps(handle)
    def refusing(requests, context):
        return handle(map(_parsed, requests), context)
    return refusing
