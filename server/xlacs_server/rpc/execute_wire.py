"""How Execute and ExecuteStream read their requests and write their responses (docs/data_plane.md), so that the
daemon copies a tensor's bytes once each way, as the client does. A request's tensors are read in place with
xlacs.wire: an ExecuteStream request reaches the servicer as (the ExecuteRequest without its inputs, its pieces as
(Tensor without content, a view of the content in the received bytes)); an Execute request as xlacs.wire.read gives
it: (the ExecuteRequest, the content of each input as such a view, its Tensor holding none), or, under
wire.READ_IN_PLACE_BYTES, (the ExecuteRequest protobuf parsed, None). The responses of both are the bytes execute_io
wrote with xlacs.wire. Bytes that are no ExecuteRequest are refused as every request's are (rpc/malformed.py)."""
import grpc
from xlacs import wire
from xlacs.v1 import xlacs_pb2

EXECUTE = "/xlacs.v1.Compiler/Execute"
EXECUTE_STREAM = "/xlacs.v1.Compiler/ExecuteStream"
INPUTS = xlacs_pb2.ExecuteRequest.INPUTS_FIELD_NUMBER


def request_pieces(data: bytes) -> tuple[xlacs_pb2.ExecuteRequest, list[tuple[xlacs_pb2.Tensor, memoryview]]]:
    return wire.decode(data, xlacs_pb2.ExecuteRequest, INPUTS)


def execute_request(data: bytes) -> tuple[xlacs_pb2.ExecuteRequest, list[memoryview] | None]:
    return wire.read(data, xlacs_pb2.ExecuteRequest, INPUTS)


class ExecuteWireInterceptor(grpc.ServerInterceptor):
    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None or details.method not in (EXECUTE, EXECUTE_STREAM):
            return handler
        read = execute_request if details.method == EXECUTE else request_pieces
        return handler._replace(request_deserializer=read, response_serializer=wire.as_is)
