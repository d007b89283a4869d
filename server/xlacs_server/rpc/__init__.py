"""Stage 7: the gRPC surface. Servicers only translate protos; one interceptor maps errors to statuses."""
