"""Builds the gRPC server: the Compiler service, the Open Inference Protocol's and TensorFlow Serving's services,
health, reflection, the drain, auth and error interceptors, TLS."""
import pathlib

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from xlacs.v1 import xlacs_pb2, xlacs_pb2_grpc
from xlacs_server.config import REQUEST_HEADROOM_BYTES, Settings
from xlacs_server.daemon import Daemon
from xlacs_server.inference import grpc_servicer
from xlacs_server.inference.v2 import grpc_service_pb2_grpc
from xlacs_server.rpc import readiness
from xlacs_server.rpc.auth import AuthInterceptor, TokenStore
from xlacs_server.rpc.drain import Drain
from xlacs_server.rpc.errors import ErrorInterceptor
from xlacs_server.rpc.execute_wire import ExecuteWireInterceptor
from xlacs_server.rpc.malformed import MalformedRequestInterceptor
from xlacs_server.rpc.received import ReceivedBytesInterceptor
from xlacs_server.rpc.servicer import CompilerServicer
from xlacs_server.tfserving import servicer as tfserving

SERVICE_NAME = xlacs_pb2.DESCRIPTOR.services_by_name["Compiler"].full_name
MAX_PROTOBUF_BYTES = 2 ** 31 - 1  # protobuf cannot serialize a message of 2 GiB or more


def create_server(service: Daemon, address: str,
                  drain: Drain | None = None) -> tuple[grpc.Server, int, health.HealthServicer]:
    """A started-ready (not yet started) server bound to `address`; port 0 picks a free port. `drain` is what
    stops it at shutdown (one of its own when none is given)."""
    settings = service.settings
    drain = drain or Drain()
    tokens = TokenStore.from_settings(settings)
    received = min(max(settings.max_graph_bytes, settings.max_input_bytes) + REQUEST_HEADROOM_BYTES,
                   MAX_PROTOBUF_BYTES)
    server = grpc.server(
        drain.threads(settings.workers),
        interceptors=[drain, *([AuthInterceptor(tokens)] if tokens else []), ErrorInterceptor(service.counters),
                      ReceivedBytesInterceptor(service.counters), MalformedRequestInterceptor(),
                      ExecuteWireInterceptor()],
        options=[("grpc.max_receive_message_length", received),
                 ("grpc.max_send_message_length", MAX_PROTOBUF_BYTES)],
        # Calls beyond the threads fail fast with RESOURCE_EXHAUSTED, rather than queue without bound.
        maximum_concurrent_rpcs=settings.workers)
    gates = service.gates
    xlacs_pb2_grpc.add_CompilerServicer_to_server(CompilerServicer(service, gates), server)
    # The Open Inference Protocol (Triton's inference.GRPCInferenceService) for the models of the repository.
    grpc_service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(grpc_servicer.InferenceServicer(service), server)
    # TensorFlow Serving's PredictionService and ModelService over the same models (docs/tf_serving.md).
    tf_serving = tfserving.add_to_server(service, server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    # Each service's health and whether it waits for the model repository's initial load (the server's, "", does).
    readiness.watch(service, health_servicer, {SERVICE_NAME: False, grpc_servicer.SERVICE_NAME: True, "": True,
                                               **{name: True for name in tf_serving}})
    reflection.enable_server_reflection(
        (SERVICE_NAME, grpc_servicer.SERVICE_NAME, *tf_serving,
         health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME), server)
    credentials = server_credentials(settings)
    port = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
    if port == 0:
        raise RuntimeError(f"cannot bind gRPC to {address}")
    return server, port, health_servicer


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """TLS when a certificate and its key are set; mutual TLS (clients must present a certificate signed by
    tls_client_ca_file) when a client CA is set too."""
    if not settings.tls_cert_file and not settings.tls_key_file:
        if settings.tls_client_ca_file:
            raise ValueError("tls_client_ca_file needs tls_cert_file and tls_key_file: mutual TLS is TLS first")
        return None
    if not settings.tls_cert_file or not settings.tls_key_file:
        raise ValueError("TLS needs both tls_cert_file and tls_key_file")
    client_ca = pathlib.Path(settings.tls_client_ca_file).read_bytes() if settings.tls_client_ca_file else None
    return grpc.ssl_server_credentials(
        [(pathlib.Path(settings.tls_key_file).read_bytes(), pathlib.Path(settings.tls_cert_file).read_bytes())],
        root_certificates=client_ca, require_client_auth=client_ca is not None)
