"""The server's readiness is one answer on every probe: the gRPC health service (per service), the protocol's
ServerReady on gRPC, and /readyz and /v2/health/ready on HTTP, from a daemon whose model repository has not loaded
yet, through its load, to its drain for shutdown."""
from __future__ import annotations

import time

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.model_repository import graphdef_model
from xlacs_server.config import Settings
from xlacs_server.dashboard import create_app
from xlacs_server.dashboard.http import HttpServer
from xlacs_server.inference.v2 import grpc_service_pb2 as pb, grpc_service_pb2_grpc
from xlacs_server.rpc.readiness import POLL_S
from xlacs_server.rpc.server import SERVICE_NAME, create_server
from xlacs_server.daemon import Daemon

INFERENCE = "inference.GRPCInferenceService"


def probes(channel: grpc.Channel, http: httpx.Client) -> dict:
    health = health_pb2_grpc.HealthStub(channel)
    status = {name or "server": health_pb2.HealthCheckResponse.ServingStatus.Name(health.Check(
        health_pb2.HealthCheckRequest(service=name), timeout=30).status) for name in (SERVICE_NAME, INFERENCE, "")}
    ready = grpc_service_pb2_grpc.GRPCInferenceServiceStub(channel).ServerReady(pb.ServerReadyRequest(), timeout=30)
    head = http.head("/v2/health/ready")  # as GET, without the body
    assert head.content == b""
    return {**status, "ServerReady": ready.ready, "/readyz": http.get("/readyz").json()["status"],
            "/v2/health/ready": http.get("/v2/health/ready").json().get("reason", "ready"), "HEAD": head.status_code}


def eventually(channel, http, want: dict) -> dict:
    """The probes' answers once they equal `want`, or as they are after a few polls of the readiness thread."""
    deadline = time.monotonic() + 10 * POLL_S
    while (got := probes(channel, http)) != want and time.monotonic() < deadline:
        time.sleep(0.1)
    return got


def test_every_probe_agrees_from_the_repositorys_load_to_the_drain(tmp_path):
    graphdef_model(tmp_path, "keras_gd")
    service = Daemon(Settings(cache_dir="", model_repository=str(tmp_path)))
    server, port, _ = create_server(service, "127.0.0.1:0")
    http_server = HttpServer(create_app(service), "127.0.0.1", 0)
    server.start()
    http_server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel, \
                httpx.Client(base_url=f"http://127.0.0.1:{http_server.port}", timeout=30) as http:
            loading = "the model repository is loading"
            # Before the load starts: the Compiler takes calls, the protocol's service and the server do not.
            assert probes(channel, http) == {
                SERVICE_NAME: "SERVING", INFERENCE: "NOT_SERVING", "server": "NOT_SERVING", "ServerReady": False,
                "/readyz": "ready", "/v2/health/ready": loading, "HEAD": 503}
            service.models.start()
            assert service.models.wait_ready(300)
            ready = {SERVICE_NAME: "SERVING", INFERENCE: "SERVING", "server": "SERVING", "ServerReady": True,
                     "/readyz": "ready", "/v2/health/ready": "ready", "HEAD": 200}
            assert eventually(channel, http, ready) == ready
            service.draining = True  # as the daemon's shutdown sets it
            draining = {SERVICE_NAME: "NOT_SERVING", INFERENCE: "NOT_SERVING", "server": "NOT_SERVING",
                        "ServerReady": False, "/readyz": "draining", "/v2/health/ready": "draining", "HEAD": 503}
            assert eventually(channel, http, draining) == draining
    finally:
        http_server.stop()
        server.stop(None)
        service.close()
