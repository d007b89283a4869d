"""ModelStreamInfer's requests run as they come, as Triton runs a stream's requests to a model that is not decoupled:
each on a thread of a pool that every stream shares, so that a dynamic batcher merges one stream's requests as it
merges concurrent clients'; the answers go back in the order of the requests. A stream reads ahead only as many
requests as fit in max_input_bytes together (always one): past that its next request waits in gRPC's flow control,
so that a client that sends without reading its answers holds no more than one large request's worth."""
from __future__ import annotations

import queue
import threading
from concurrent import futures
from typing import Callable, Iterator, TypeVar

Request, Answer = TypeVar("Request"), TypeVar("Answer")


class StreamRuns:
    def __init__(self, threads: int, max_bytes: int):
        self.max_bytes = max_bytes
        self._pool = futures.ThreadPoolExecutor(threads, thread_name_prefix="stream-infer")

    def answers(self, requests: Iterator[Request], answer: Callable[[Request], Answer],
                size: Callable[[Request], int]) -> Iterator[Answer]:
        """`answer(request)` of each request, run concurrently, in the order of the requests; an error the requests
        raise (the client went away) or an answer raises ends the answers with it."""
        window = _Window(self.max_bytes)
        pending: queue.SimpleQueue = queue.SimpleQueue()  # (future, bytes) in request order; then None or an error

        def read() -> None:
            try:
                for request in requests:
                    nbytes = size(request)
                    if not window.enter(nbytes):
                        return  # the answers ended: nobody reads what would come
                    pending.put((self._pool.submit(answer, request), nbytes))
                pending.put(None)
            except BaseException as e:  # handed to the answering side, which raises it
                pending.put(e)
        threading.Thread(target=read, daemon=True, name="stream-requests").start()
        try:
            while (item := pending.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                future, nbytes = item
                result = future.result()
                window.leave(nbytes)
                yield result
        finally:
            window.close()


class _Window:
    """The requests of one stream read and not yet answered: together at most max_bytes, but always one."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = self.count = 0
        self.closed = False
        self._changed = threading.Condition()

    def enter(self, nbytes: int) -> bool:
        """Waits for room for a request of `nbytes`; False once the window is closed."""
        with self._changed:
            self._changed.wait_for(lambda: self.closed or not self.count or self.bytes + nbytes <= self.max_bytes)
            if self.closed:
                return False
            self.bytes, self.count = self.bytes + nbytes, self.count + 1
            return True

    def leave(self, nbytes: int) -> None:
        with self._changed:
            self.bytes, self.count = self.bytes - nbytes, self.count - 1
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self.closed = True
            self._changed.notify_all()
