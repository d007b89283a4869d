"""The dashboard asks for the daemon's bearer tokens when authentication is on, on every address (loopback
included: other users of the host reach it too). Browsers get a Basic prompt (any user name, the token as
password); scripts, Prometheus and inference clients send `Authorization: Bearer <token>`. The probes stay open:
/healthz and /readyz, and the Open Inference Protocol's /v2/health/live and /v2/health/ready. The protocol's
clients read its error object, {"error": message}, so a refusal under /v2 is one (and under /v1, TF Serving's REST
API, whose errors are the same object)."""
from __future__ import annotations

import base64
import binascii

from fastapi import FastAPI
from starlette.responses import JSONResponse, PlainTextResponse

from xlacs_server.config import Settings
from xlacs_server.rpc.auth import TokenStore

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/v2/health/live", "/v2/health/ready"})
REFUSED = ("this dashboard needs the daemon's token: Authorization: Bearer <token>, or Basic with the token as "
           "password")
CHALLENGE = {"WWW-Authenticate": 'Basic realm="xlacs"'}


def protect(app: FastAPI, settings: Settings) -> None:
    tokens = TokenStore.from_settings(settings)
    if tokens is not None:
        app.add_middleware(RequireToken, tokens=tokens)


def token_of(header: str) -> str:
    """The token of an `Authorization` value: `Bearer <token>`, or Basic credentials whose password it is."""
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer":
        return value.strip()
    if scheme.lower() == "basic":
        try:
            return base64.b64decode(value.strip(), validate=True).decode().partition(":")[2]
        except (binascii.Error, UnicodeDecodeError):
            return ""
    return ""


class RequireToken:
    """ASGI middleware: an HTTP request without a valid token gets 401 before any route runs."""

    def __init__(self, app, tokens: TokenStore):
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            headers = [value for key, value in scope["headers"] if key == b"authorization"]
            token = token_of(headers[0].decode("latin-1")) if len(headers) == 1 else ""
            if not token or not self.tokens.valid(token):
                if scope["path"] in ("/v1", "/v2") or scope["path"].startswith(("/v1/", "/v2/")):
                    response = JSONResponse({"error": REFUSED}, status_code=401, headers=CHALLENGE)
                else:
                    response = PlainTextResponse(REFUSED, status_code=401, headers=CHALLENGE)
                return await response(scope, receive, send)
        await self.app(scope, receive, send)
