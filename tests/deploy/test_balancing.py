"""Client-side balancing over a name that resolves to every replica (a headless Service, a compose service):
each Client keeps one replica, Clients spread over them, and a Client whose replica stops moves on."""
import collections
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from xlacs import Client

REPLICAS = 3


@pytest.fixture
def replicas():
    """gRPC servers on loopback; replica i alone reports the health service `replica-i` as SERVING."""
    servers, ports = [], []
    for i in range(REPLICAS):
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        servicer = health.HealthServicer()
        servicer.set(f"replica-{i}", health_pb2.HealthCheckResponse.SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
        ports.append(server.add_insecure_port("127.0.0.1:0"))
        server.start()
        servers.append(server)
    yield servers, "ipv4:" + ",".join(f"127.0.0.1:{p}" for p in ports)
    for server in servers:
        server.stop(grace=None)


def replica_of(client: Client) -> int:
    stub = health_pb2_grpc.HealthStub(client.channel)
    answered = []
    for i in range(REPLICAS):
        try:
            stub.Check(health_pb2.HealthCheckRequest(service=f"replica-{i}"), timeout=10)
            answered.append(i)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.NOT_FOUND, e
    (replica,) = answered
    return replica


def test_clients_keep_one_replica_each_and_spread_over_them(replicas):
    _, target = replicas
    used = collections.Counter()
    for _ in range(12):
        with Client(target) as client:
            first = replica_of(client)
            assert all(replica_of(client) == first for _ in range(3))
            used[first] += 1
    assert len(used) >= 2, f"every client chose the same replica: {used}"  # 3 * (1/3)**12 if it were chance


def test_a_client_whose_replica_stops_reaches_another(replicas):
    servers, target = replicas
    with Client(target) as client:
        before = replica_of(client)
        servers[before].stop(grace=None)
        assert replica_of(client) != before
