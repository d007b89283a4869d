"""Stage 7: the gRPC surface. Imports inference/, daemon.py and the layers below them.

Servicers only translate protos; one interceptor maps errors to statuses. The server also serves inference/'s
servicer on the same port."""
