"""Counts the bytes of every request message by RPC as they come off the wire, before they are parsed
(GetStats' received_bytes, /metrics' xlacs_received_bytes_total): what content-addressed uploads save shows."""
import grpc


class ReceivedBytesInterceptor(grpc.ServerInterceptor):
    def __init__(self, counters):
        self.counters = counters

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None or handler.request_deserializer is None:
            return handler
        rpc, parse = details.method.rsplit("/", 1)[-1], handler.request_deserializer

        def counted(data: bytes):
            self.counters.add_received(rpc, len(data))
            return parse(data)
        return handler._replace(request_deserializer=counted)
