"""Each Client has a connection of its own, even to the same target with the same options: a load balancer that
balances connections (deploy/haproxy/haproxy.cfg) then spreads the Clients of one process over the replicas."""
from concurrent import futures

import grpc

from xlacs import Client


def test_two_clients_to_one_target_reach_the_server_over_two_connections():
    peers = []

    def peer(request, context):
        peers.append(context.peer())
        return b""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
        "test.Peer", {"Get": grpc.unary_unary_rpc_method_handler(peer)})])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        clients = [Client(f"127.0.0.1:{port}") for _ in range(2)]
        for client in clients:
            for _ in range(2):
                client.channel.unary_unary("/test.Peer/Get")(b"", timeout=30)
        for client in clients:
            client.close()
    finally:
        server.stop(grace=None)
    assert peers[0] == peers[1] and peers[2] == peers[3] and peers[0] != peers[2], peers
