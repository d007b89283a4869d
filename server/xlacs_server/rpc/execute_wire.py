"""How Execute and ExecuteStream read their requests. ExecuteStream's messages go through xlacs.wire
(docs/data_plane.md), so that the daemon copies a piece's content once each way, as the client does: a request
reaches the servicer as (the ExecuteRequest without its inputs, its pieces as (Tensor without content, a view of the
content in the received bytes)); the servicer's responses are the bytes execute_io wrote. Execute's are protobuf's
(for a tensor sent whole, walking the fields in Python cost a tiny Execute more than the copies it saved a larger
one). Bytes that are no ExecuteRequest reach the handler as Malformed, which `parsed` refuses as INVALID_ARGUMENT:
grpc answers a deserializer that raises with INTERNAL."""
from typing import Callable

import grpc
from google.protobuf.message import DecodeError
from xlacs import wire
from xlacs.v1 import xlacs_pb2

from xlacs_server.errors import InvalidRequest

EXECUTE, EXECUTE_STREAM = "/xlacs.v1.Compiler/Execute", "/xlacs.v1.Compiler/ExecuteStream"


class Malformed(str):
    """Why the bytes of a request are no ExecuteRequest."""


def _or_malformed(read: Callable[[bytes], object]) -> Callable[[bytes], object]:
    def deserialize(data: bytes):
        try:
            return read(data)
        except (ValueError, DecodeError) as e:
            return Malformed(str(e) or type(e).__name__)
    return deserialize


def request_pieces(data: bytes) -> tuple[xlacs_pb2.ExecuteRequest, list[tuple[xlacs_pb2.Tensor, memoryview]]]:
    return wire.decode(data, xlacs_pb2.ExecuteRequest, xlacs_pb2.ExecuteRequest.INPUTS_FIELD_NUMBER)


def parsed(received):
    """A request as the deserializer left it; InvalidRequest if it was Malformed."""
    if isinstance(received, Malformed):
        raise InvalidRequest(f"the request is not a well-formed xlacs.v1.ExecuteRequest: {received}")
    return received


class ExecuteWireInterceptor(grpc.ServerInterceptor):
    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None or details.method not in (EXECUTE, EXECUTE_STREAM):
            return handler
        if details.method == EXECUTE:
            return handler._replace(request_deserializer=_or_malformed(xlacs_pb2.ExecuteRequest.FromString))
        return handler._replace(request_deserializer=_or_malformed(request_pieces), response_serializer=wire.as_is)
