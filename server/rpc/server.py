"""Builds the gRPC server: the Compiler service, health, reflection, and the error interceptor."""
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from xlacs.v1 import xlacs_pb2, xlacs_pb2_grpc
from xlacs_server.rpc.errors import ErrorInterceptor
from xlacs_server.rpc.servicer import CompilerServicer
from xlacs_server.service import CompilationService

SERVICE_NAME = xlacs_pb2.DESCRIPTOR.services_by_name["Compiler"].full_name


def create_server(service: CompilationService, address: str) -> tuple[grpc.Server, int, health.HealthServicer]:
    """A started-ready (not yet started) server bound to `address`; port 0 picks a free port."""
    limit = service.settings.max_message_bytes
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=service.settings.workers, thread_name_prefix="rpc"),
        interceptors=[ErrorInterceptor(service.counters)],
        options=[("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit)])
    xlacs_pb2_grpc.add_CompilerServicer_to_server(CompilerServicer(service), server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for name in (SERVICE_NAME, ""):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection(
        (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME), server)
    port = server.add_insecure_port(address)
    if port == 0:
        raise RuntimeError(f"cannot bind gRPC to {address}")
    return server, port, health_servicer
