"""The Open Inference Protocol over HTTP/REST (KServe's v2, with Triton's binary data, model repository, model
configuration and statistics extensions), on the dashboard's app: same port, same tokens. The endpoints translate
JSON and call service.models (models/repository.py); docs/inference.md lists them."""
from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import zlib

import anyio
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from google.protobuf import json_format
from pydantic import BaseModel

from xlacs_server import version as xlacs_version
from xlacs_server.config import REQUEST_HEADROOM_BYTES
from xlacs_server.errors import InvalidRequest, LimitExceeded, NotFound, Unimplemented
from xlacs_server.inference import (EXTENSIONS, binary_data, content_coding, infer_request, parameters, statistics_of,
                                    status)
from xlacs_server.models.model import READY, ready

SHARED_MEMORY = parameters.OFFERED_INSTEAD["shared_memory_region"]
NOT_OFFERED = [  # Triton's extensions xlacs leaves out: their paths answer 501 saying what xlacs offers instead
    (re.compile(r"/v2/(system|cuda)sharedmemory(/.*)?"), SHARED_MEMORY),
    (re.compile(r"/v2/(models/[^/]+/)?trace/setting"), "xlacs has no request tracing: per-model queue and compute "
                                                       "times are at /v2/models/<model>/stats and /metrics"),
    (re.compile(r"/v2/logging"), "xlacs logs to its standard error at INFO, set when it starts"),
    (re.compile(r"/v2/models/[^/]+(/versions/[^/]+)?/generate(_stream)?"), "xlacs has no generate extension: "
                                                                              "send tensors to /infer"),
]


class ProtocolError(BaseModel):
    """The protocol's error object."""
    error: str


class Readiness(BaseModel):
    """The server's readiness, and why not."""
    ready: bool
    reason: str | None = None


def router(service, endpoints: Endpoints | None = None) -> APIRouter:
    """The protocol's endpoints over `service` (those of `endpoints` when given, shared with /v1)."""
    endpoints = endpoints or Endpoints(service)
    api = APIRouter(tags=["inference"], route_class=answering_errors(service.counters))
    error = {code: {"model": ProtocolError} for code in (400, 401, 404, 429, 500, 501, 503, 504)}
    model_paths = ("/v2/models/{name}", "/v2/models/{name}/versions/{version}")
    for method, paths, handler in [
        ("GET", ("/v2",), endpoints.server_metadata),
        ("GET", ("/v2/health/live",), endpoints.live),
        ("GET", ("/v2/health/ready",), endpoints.ready),
        ("GET", ("/v2/models/stats", *(p + "/stats" for p in model_paths)), endpoints.statistics),
        ("GET", model_paths, endpoints.model_metadata),
        ("GET", tuple(p + "/ready" for p in model_paths), endpoints.model_ready),
        ("GET", tuple(p + "/config" for p in model_paths), endpoints.model_config),
        ("POST", tuple(p + "/infer" for p in model_paths), endpoints.infer),
        ("POST", ("/v2/repository/index",), endpoints.repository_index),
        ("POST", ("/v2/repository/models/{name}/load",), endpoints.load),
        ("POST", ("/v2/repository/models/{name}/unload",), endpoints.unload),
    ]:
        for path in paths:
            api.add_api_route(path, handler, methods=[method],
                              responses={503: {"model": Readiness}} if handler == endpoints.ready else error)
            if method == "GET":  # HEAD as GET without the body (RFC 9110): probes and balancers ask it
                api.add_api_route(path, handler, methods=["HEAD"], include_in_schema=False)
    api.add_api_route("/v2/{path:path}", endpoints.no_endpoint, include_in_schema=False,
                      methods=["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])
    return api


class Endpoints:
    def __init__(self, service):
        self.service, self.models = service, service.models
        settings = service.settings
        # A blocked infer holds a thread (while the batcher gathers, or the model runs): as many as gRPC has.
        self.infer_threads = anyio.CapacityLimiter(settings.workers)
        self.max_body_bytes = settings.max_input_bytes + REQUEST_HEADROOM_BYTES
        self.max_input_bytes = settings.max_input_bytes

    # --- Health and metadata ---------------------------------------------------------------------

    def server_metadata(self) -> dict:
        return {"name": "xlacs", "version": xlacs_version.VERSION, "extensions": list(EXTENSIONS)}

    def live(self) -> dict:
        """The process answers."""
        return {"live": True}

    def ready(self) -> Response:
        """Ready: the daemon takes requests (as /readyz) and the model repository's initial load has ended."""
        why = self.service.unready(models=True)
        if why:
            return JSONResponse({"ready": False, "reason": why}, status_code=503)
        return JSONResponse({"ready": True})

    def model_metadata(self, name: str, version: str = "") -> dict:
        return infer_request.metadata_of(self.models, name, version)

    def model_ready(self, name: str, version: str = "") -> dict:
        """200 when the version (the highest ready one without a version) is READY; 503 saying why otherwise."""
        return {"name": self._ready(name, version).name, "ready": True}

    def model_config(self, name: str, version: str = "") -> dict:
        """The config as served (a SavedModel's inputs and outputs filled in from its signature)."""
        return json_format.MessageToDict(self._ready(name, version).config, preserving_proto_field_name=True,
                                         always_print_fields_with_no_presence=True, unquote_int64_if_possible=True)

    def statistics(self, name: str = "", version: str = "") -> dict:
        """Every served version's statistics; those of one model, or of one version."""
        return {"model_stats": statistics_of(self.models, name, version)}

    # --- Inference -------------------------------------------------------------------------------

    async def infer(self, request: Request, name: str, version: str = "") -> Response:
        """JSON tensors, or binary data after the JSON (Inference-Header-Content-Length); outputs likewise. The
        body's decoding, the model's run and the answer's encoding happen in a thread: the event loop only reads
        and writes bytes, and notices the client leaving."""
        context = RequestContext()
        body = await self._body(request)
        model = self.models.model(name, version)
        headers = request.headers
        watch = asyncio.ensure_future(context.watch(request.receive))
        try:
            content, answer_headers, media_type = await anyio.to_thread.run_sync(
                self._infer, model, body, headers.get("content-encoding", "identity").lower(),
                headers.get(binary_data.HEADER), content_coding.accepted(headers.get("accept-encoding")), context,
                limiter=self.infer_threads)
        finally:
            watch.cancel()
        return Response(content, headers=answer_headers, media_type=media_type)

    def _infer(self, model, body: bytes, encoding: str, header_length: str | None, answer_coding: str | None,
               context: RequestContext):
        parsed = infer_request.parse(self._decoded(body, encoding), header_length, model)
        context.deadline_in(parsed.timeout_s)
        outputs = model.infer(parsed.inputs, parsed.outputs, context)
        content, headers, media_type = infer_request.response(model, parsed, outputs)
        if answer_coding is not None:  # as the client accepts; Inference-Header-Content-Length counts the plain JSON
            content = content_coding.encoded(content, answer_coding)
            headers = {**headers, "Content-Encoding": answer_coding}
        return content, headers, media_type

    # --- Model repository ------------------------------------------------------------------------

    async def repository_index(self, request: Request) -> list[dict]:
        """Every model directory's versions, with state and reason; {"ready": true} keeps the READY ones."""
        body = parameters.check(await self._json(request), ("ready",), "the index request")
        ready = parameters.flag(body, "ready", "the index request")
        return [{"name": s.name, **({"version": s.version} if s.version else {}), "state": s.state,
                 "reason": s.reason} for s in self.models.index() if not ready or s.state == READY]

    async def load(self, request: Request, name: str) -> Response:
        """(Re)loads the model, returning once every version has been tried; parameter "config" (its JSON)
        replaces config.pbtxt."""
        options = (await self._json(request)).get("parameters", {})
        if isinstance(options, dict) and any(key.startswith("file:") for key in options):
            raise Unimplemented("load: the \"file:\" parameters are not offered; xlacs loads models from its "
                                "repository directory: put the files in <repository>/<model>/<version>/")
        options = parameters.check(options, ("config",), "load")
        config = options.get("config", "")
        if not isinstance(config, str):
            raise InvalidRequest("load: parameter 'config' must be a string holding the model config's JSON")
        await anyio.to_thread.run_sync(self.models.load, name, config)
        return Response()

    async def unload(self, request: Request, name: str) -> Response:
        """UNLOADING: requests in flight finish, then the model is gone. xlacs has no ensembles, so no model
        depends on another: "unload_dependents" has nothing more to unload."""
        options = parameters.check((await self._json(request)).get("parameters", {}), ("unload_dependents",),
                                   "unload")
        parameters.flag(options, "unload_dependents", "unload")
        await anyio.to_thread.run_sync(self.models.unload, name)
        return Response()

    def no_endpoint(self, request: Request, path: str) -> Response:
        full = "/v2/" + path
        for pattern, instead in NOT_OFFERED:
            if pattern.fullmatch(full):
                raise Unimplemented(f"{full} is not offered: {instead}")
        raise NotFound(f"xlacs serves no {request.method} {full}; the protocol's endpoints are in docs/inference.md "
                       "(infer, repository index, load and unload are POST, the others GET)")

    # --- Helpers ---------------------------------------------------------------------------------

    def _ready(self, name: str, version: str):
        return ready(self.models.model(name, version))

    async def _body(self, request: Request) -> bytes:
        """The request's body as sent, bounded by max_input_bytes (plus room for the JSON)."""
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body_bytes:
            self._too_big(int(length))
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body_bytes:
                self._too_big(size)
            chunks.append(chunk)
        return b"".join(chunks)

    async def body(self, request: Request) -> bytes:
        """The request's body decoded as its Content-Encoding says, bounded as a body is (also for /v1)."""
        return self._decoded(await self._body(request), request.headers.get("content-encoding", "identity").lower())

    async def _json(self, request: Request) -> dict:
        """An optional JSON object body (the repository endpoints): {} when empty."""
        body = await self.body(request)
        if not body.strip():
            return {}
        try:
            value = json.loads(body)
        except ValueError as e:
            raise InvalidRequest(f"the request's body is not JSON ({e})") from None
        if not isinstance(value, dict):
            raise InvalidRequest(f"the request's body must be a JSON object, not {type(value).__name__}")
        return value

    def _decoded(self, body: bytes, encoding: str) -> bytes:
        """The body decompressed as its Content-Encoding says, bounded as a body is."""
        if encoding in ("", "identity"):
            return body
        if encoding not in content_coding.WBITS:
            raise InvalidRequest(f"Content-Encoding {encoding!r} is not one xlacs takes: gzip, deflate or none")
        decompressor = zlib.decompressobj(content_coding.WBITS[encoding])
        try:
            decoded = decompressor.decompress(body, self.max_body_bytes + 1)
        except zlib.error as e:
            raise InvalidRequest(f"the body is not valid {encoding} ({e})") from None
        if len(decoded) > self.max_body_bytes:
            self._too_big(len(decoded), "decompressed ")
        if not decompressor.eof:
            raise InvalidRequest(f"the {encoding} body ends before its compressed stream does")
        return decoded

    def _too_big(self, size: int, how: str = "") -> None:
        raise LimitExceeded(f"the request's {how}body has {size} bytes, more than its inputs and "
                            f"{REQUEST_HEADROOM_BYTES >> 20} MiB of JSON may take", "max_input_bytes",
                            self.max_input_bytes)


class RequestContext:
    """What ServedModel.infer asks of a request, as a gRPC ServicerContext offers it: the time left before the
    client's deadline (its "timeout" parameter) and whether the client is still connected (a request that leaves
    stops waiting in the batcher's queue)."""

    def __init__(self):
        self.arrived = time.monotonic()
        self.deadline: float | None = None
        self.gone = threading.Event()

    def deadline_in(self, timeout_s: float | None) -> None:
        """The client's deadline: `timeout_s` after the request arrived (None: no deadline)."""
        self.deadline = None if timeout_s is None else self.arrived + timeout_s

    def time_remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def is_active(self) -> bool:
        return not self.gone.is_set()

    async def watch(self, receive) -> None:
        """Sets `gone` when the client disconnects: once the body is read, the server's next message is that."""
        while (await receive())["type"] != "http.disconnect":
            pass
        self.gone.set()


def answering_errors(counters) -> type[APIRoute]:
    class ProtocolRoute(APIRoute):
        """An endpoint whose errors are the protocol's error objects (inference/status.py)."""

        def get_route_handler(self):
            handler, endpoint = super().get_route_handler(), f"{'/'.join(sorted(self.methods))} {self.path}"

            async def answer(request: Request) -> Response:
                try:
                    return await handler(request)
                except Exception as e:  # noqa: BLE001  (every error is an answer)
                    return status.error_response(e, endpoint, counters)
            return answer
    return ProtocolRoute

