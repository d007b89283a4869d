"""Serves an ASGI app with uvicorn from a thread of the daemon's process, beside the gRPC server."""
from __future__ import annotations

import socket
import threading
import time

import uvicorn


class HttpServer:
    """Binds at construction (so a taken port fails before anything starts); port 0 picks a free port."""

    def __init__(self, app, host: str, port: int):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.create_server((host, port), family=family)
        # Accepted connections inherit TCP_NODELAY. asyncio sets it only on sockets made with proto IPPROTO_TCP,
        # which create_server's are not: uvicorn writes an answer's head and body apart, and Nagle's algorithm held
        # the body until the client's delayed ACK, 40 ms a request (measured: 45 ms against 2.5 ms for /healthz).
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.host = host
        self.port = self._socket.getsockname()[1]
        # log_config=None: the daemon's logging setup applies; no access log, since pages poll every few seconds.
        self._server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="on",
                                                     timeout_graceful_shutdown=5))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name="http", daemon=True)

    def start(self, timeout_s: float = 30.0) -> None:
        """Returns once the app's startup has run and the server accepts connections."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP server on {self.host}:{self.port} did not start (see the log)")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stops accepting, lets open requests finish (up to 5 s), runs the app's shutdown."""
        self._server.should_exit = True
        self._thread.join()
        self._socket.close()
