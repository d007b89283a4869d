"""How Execute and ExecuteStream read their requests and write their responses. ExecuteStream's requests go through
xlacs.wire (docs/data_plane.md), so that the daemon copies a piece's content once, as the client does: a request
reaches the servicer as (the ExecuteRequest without its inputs, its pieces as (Tensor without content, a view of the
content in the received bytes)). Execute's requests are parsed by protobuf (for a tensor sent whole, walking the
fields in Python cost a tiny Execute more than the copies it saved a larger one). The responses of both are the bytes
execute_io wrote with xlacs.wire, each output's bytes copied once. Bytes that are no ExecuteRequest are refused as
every request's are (rpc/malformed.py)."""
import grpc
from xlacs import wire
from xlacs.v1 import xlacs_pb2

EXECUTE = "/xlacs.v1.Compiler/Execute"
EXECUTE_STREAM = "/xlacs.v1.Compiler/ExecuteStream"


def request_pieces(data: bytes) -> tuple[xlacs_pb2.ExecuteRequest, list[tuple[xlacs_pb2.Tensor, memoryview]]]:
    return wire.decode(data, xlacs_pb2.ExecuteRequest, xlacs_pb2.ExecuteRequest.INPUTS_FIELD_NUMBER)


class ExecuteWireInterceptor(grpc.ServerInterceptor):
    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None or details.method not in (EXECUTE, EXECUTE_STREAM):
            return handler
        if details.method == EXECUTE:
            return handler._replace(response_serializer=wire.as_is)
        return handler._replace(request_deserializer=request_pieces, response_serializer=wire.as_is)
