"""The floors of gRPC Python between two processes, no protobuf: moving raw bytes, and a call whose handler works
for a while. Run as `python -m benchmarks.raw_grpc` it serves `Sink` (takes bytes, answers none), `Source`
(answers N bytes), `Echo` (answers the bytes it takes) and `Work` (keeps the CPU busy for N µs, answers none) on
a free loopback port, which it prints."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from concurrent import futures

import grpc

from xlacs.client import MAX_MESSAGE_BYTES

OPTIONS = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
           ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]


class RawGrpc:
    """The raw server in a subprocess (so that, like xlacs serve, it has its own interpreter) and its stubs."""

    def __init__(self, env: dict | None = None):
        self.process = subprocess.Popen([sys.executable, "-m", "benchmarks.raw_grpc"], stdout=subprocess.PIPE,
                                        text=True, env={**os.environ, **(env or {})})
        port = int(self.process.stdout.readline())
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}", OPTIONS)
        self._sink = self.channel.unary_unary("/raw.Raw/Sink")
        self._source = self.channel.unary_unary("/raw.Raw/Source")
        self._echo = self.channel.unary_unary("/raw.Raw/Echo")
        self._work = self.channel.unary_unary("/raw.Raw/Work")

    def sink(self, payload: bytes) -> None:
        self._sink(payload, timeout=600)

    def source(self, nbytes: int) -> bytes:
        return self._source(str(nbytes).encode(), timeout=600)

    def echo(self, payload: bytes) -> bytes:
        return self._echo(payload, timeout=600)

    def work(self, us: int) -> None:
        self._work(str(us).encode(), timeout=600)

    def stop(self) -> None:
        self.channel.close()
        self.process.terminate()
        self.process.wait(timeout=30)

    def __enter__(self) -> "RawGrpc":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _work(request: bytes, context) -> bytes:
    """Busy for the µs the request names, as a handler computing would be (a sleep would free the core)."""
    end = time.perf_counter() + int(request) * 1e-6
    while time.perf_counter() < end:
        pass
    return b""


def main() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(4), options=OPTIONS)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("raw.Raw", {
        "Sink": grpc.unary_unary_rpc_method_handler(lambda request, context: b""),
        "Source": grpc.unary_unary_rpc_method_handler(lambda request, context: bytes(int(request))),
        "Echo": grpc.unary_unary_rpc_method_handler(lambda request, context: request),
        "Work": grpc.unary_unary_rpc_method_handler(_work),
    }),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    threading.Event().wait()  # until the benchmark terminates it


if __name__ == "__main__":
    main()
