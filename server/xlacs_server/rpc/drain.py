"""The drain at shutdown: new calls are refused, the calls in flight end, and only then does gRPC's stop begin.

Why in that order: once gRPC's stop has sent its GOAWAY, a connection closes as soon as its last stream is written
(chttp2's remove_stream, "Last stream closed after sending GOAWAY"): written to the socket, not read by the client.
A client still reading a large answer acknowledges what it read (a WINDOW_UPDATE) on a socket that this end has
shut, and the kernel answers with a RST that drops the answer's unsent tail (TcpExtTCPAbortOnData): the client gets
UNAVAILABLE "Connection reset by peer ... GOAWAY received", although its call had ended well here. Stopped after
the last answer was written, gRPC sends GOAWAY and a PING behind it, and closes once the client has acknowledged the
PING, which it does only after it has read all that came before.

So that no answer is left behind, a call counts from the moment gRPC hands it to the server's threads until gRPC
reports the RPC done (`context.add_callback`: the status written, after the answer), not until its handler returns.
"""
import functools
import threading
import time
from concurrent import futures

import grpc

REFUSED = "the server is shutting down and takes no new calls; send the call again (another replica takes it)"


class Drain(grpc.ServerInterceptor):
    """The first of the server's interceptors; its server's threads come from `threads`."""

    def __init__(self):
        self._changed = threading.Condition()
        self._open = 0  # calls handed to the threads and not yet done on the wire; some counted twice, none missed
        self._closed = False

    def threads(self, workers: int) -> futures.ThreadPoolExecutor:
        """The server's threads: a call counts as open from when gRPC hands it to them (before any interceptor runs
        there), so that a call waiting for a thread as the drain begins is waited for too."""
        return _Threads(self, workers)

    def close(self) -> None:
        """New calls are refused with UNAVAILABLE from now on; the calls in flight go on."""
        with self._changed:
            self._closed = True

    def stop(self, server: grpc.Server, grace_s: float) -> bool:
        """Once `close`d: waits up to `grace_s` for the calls in flight to end, then stops `server`, which closes
        each connection once its client has read what it was sent. Cancels what is left at the deadline (the calls
        still running, and the connections of clients that do not answer gRPC's PING). Returns whether all ended
        within `grace_s`."""
        deadline = time.monotonic() + grace_s
        with self._changed:
            ended = self._changed.wait_for(lambda: self._open == 0, grace_s)
        # The deadline is kept here, not by gRPC's own grace: its timer would cancel the calls at a moment of its
        # own, and a call cut there may end its work before the daemon counts it.
        if ended and server.stop(grace=threading.TIMEOUT_MAX).wait(max(0.0, deadline - time.monotonic())):
            return True
        server.stop(grace=None)  # cancels every call left; returns once the server has stopped
        return False

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None:
            return None
        refused = self._closed
        return handler._replace(**{kind: self._followed(_refuse if refused else getattr(handler, kind))
                                   for kind in _KINDS if getattr(handler, kind) is not None})

    def _followed(self, behavior):
        """`behavior`, counting its call open until gRPC reports the RPC done. Its attributes stay its own
        (experimental_non_blocking: a handler that returns at once and answers through a callback)."""
        @functools.wraps(behavior)
        def followed(request, context, *callback):
            self._opened()
            if not context.add_callback(self._done):  # the RPC is done already (the client cancelled it)
                self._done()
            return behavior(request, context, *callback)
        return followed

    def _opened(self) -> None:
        with self._changed:
            self._open += 1

    def _done(self) -> None:
        with self._changed:
            self._open -= 1
            self._changed.notify_all()


class _Threads(futures.ThreadPoolExecutor):
    """The server's thread pool, counting each call it is handed as open until its handler has returned (gRPC
    hands the pool nothing but calls). A handler counts itself open before it returns (`Drain._followed`), so a
    call is never uncounted between the two."""

    def __init__(self, drain: Drain, workers: int):
        super().__init__(max_workers=workers, thread_name_prefix="rpc")
        self._drain = drain

    def submit(self, fn, /, *args, **kwargs):
        self._drain._opened()
        try:
            future = super().submit(fn, *args, **kwargs)
        except BaseException:
            self._drain._done()
            raise
        future.add_done_callback(lambda _: self._drain._done())
        return future


_KINDS = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")


def _refuse(request, context, *callback):
    """In place of a handler of any kind: a streamed request is not read."""
    context.abort(grpc.StatusCode.UNAVAILABLE, REFUSED)
