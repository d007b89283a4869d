"""Bearer-token authentication: the tokens (a file re-read when it changes, and/or a list from the settings)
and the one server interceptor that checks `authorization: Bearer <token>` on every call but health checks."""
from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading

import grpc

from xlacs_server import metrics
from xlacs_server.config import Settings

log = logging.getLogger(__name__)

OPEN_SERVICES = ("grpc.health.v1.Health",)  # probes need no token


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class TokenStore:
    """The tokens that may call. The file holds one token per line (blank lines and `#` comments skipped);
    it is re-read when its mtime, size or inode change, so tokens rotate without a restart. If the file
    goes missing or unreadable the last tokens read stay valid, and the error is logged."""

    def __init__(self, path: str = "", tokens: tuple[str, ...] = ()):
        self.path = path
        self._fixed = {_digest(t) for t in tokens if t}
        self._from_file: set[bytes] = set()
        self._stamp = None
        self._error = ""  # the last error reading the file, logged once
        self._lock = threading.Lock()
        if path:
            self._refresh()  # a missing file at start is a configuration error

    @classmethod
    def from_settings(cls, settings: Settings) -> "TokenStore | None":
        """None when authentication is off (no token file and no tokens)."""
        if not settings.auth_tokens_file and not settings.auth_tokens:
            return None
        return cls(settings.auth_tokens_file, settings.auth_tokens)

    def valid(self, token: str) -> bool:
        """Whether `token` is one of the tokens; compares digests in constant time, against every token."""
        digest = _digest(token)
        return any([hmac.compare_digest(digest, known) for known in self._current()])

    def valid_header(self, value: str) -> bool:
        """Whether an `authorization` value is `Bearer <a valid token>`."""
        scheme, _, token = value.partition(" ")
        return scheme.lower() == "bearer" and bool(token.strip()) and self.valid(token.strip())

    def _current(self) -> set[bytes]:
        if self.path:
            try:
                self._refresh()
            except (OSError, UnicodeError) as e:
                if str(e) != self._error:
                    log.error("cannot read the token file %s (%s); the tokens read before stay valid", self.path, e)
                self._error = str(e)
        return self._fixed | self._from_file

    def _refresh(self) -> None:
        stat = os.stat(self.path)
        stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if stamp == self._stamp:
            return
        with self._lock:
            with open(self.path, encoding="utf-8") as f:
                lines = [line.strip() for line in f]
            self._from_file = {_digest(line) for line in lines if line and not line.startswith("#")}
            self._stamp = stamp
            self._error = ""
        log.info("read %d token(s) from %s", len(self._from_file), self.path)


class AuthInterceptor(grpc.ServerInterceptor):
    """Calls without a valid bearer token end with UNAUTHENTICATED before any handler runs; the health
    service stays open for probes."""

    def __init__(self, tokens: TokenStore):
        self.tokens = tokens

    def intercept_service(self, continuation, details):
        service, _, method = details.method.lstrip("/").rpartition("/")
        if service in OPEN_SERVICES:
            return continuation(details)
        headers = [value for key, value in details.invocation_metadata or () if key == "authorization"]
        if len(headers) == 1 and self.tokens.valid_header(headers[0]):
            return continuation(details)
        metrics.RPC_ERRORS.labels(method, grpc.StatusCode.UNAUTHENTICATED.name).inc()
        reason = ("missing authorization metadata" if not headers else "the bearer token is not valid"
                  if len(headers) == 1 else f"{len(headers)} authorization headers: send exactly one")
        return _deny(continuation(details), reason)


def _deny(handler, reason: str):
    """A handler of the same kind as `handler` that rejects the call."""
    message = f"{reason}: send `authorization: Bearer <token>` (xlacs --token, Client(token=...))"

    def unary(request, context):
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    def streaming(request_or_iterator, context):
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
        yield  # a generator, as streaming handlers are

    if handler is None:
        return None
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(unary)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(streaming)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(unary)
    return grpc.stream_stream_rpc_method_handler(streaming)
