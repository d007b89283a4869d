"""ExecuteStream's messages through xlacs.wire (docs/data_plane.md), so that the daemon copies a piece's content
once each way, as the client does: a request reaches the servicer as (the ExecuteRequest without its inputs, its
pieces as (Tensor without content, a view of the content in the received bytes)); the servicer's responses are
the bytes execute_io wrote."""
import grpc
from xlacs import wire
from xlacs.v1 import xlacs_pb2

METHOD = "/xlacs.v1.Compiler/ExecuteStream"


def request_pieces(data: bytes) -> tuple[xlacs_pb2.ExecuteRequest, list[tuple[xlacs_pb2.Tensor, memoryview]]]:
    return wire.decode(data, xlacs_pb2.ExecuteRequest, xlacs_pb2.ExecuteRequest.INPUTS_FIELD_NUMBER)


class PiecesInterceptor(grpc.ServerInterceptor):
    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None or details.method != METHOD:
            return handler
        return handler._replace(request_deserializer=request_pieces, response_serializer=wire.as_is)
