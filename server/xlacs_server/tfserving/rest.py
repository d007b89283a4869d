"""TensorFlow Serving's REST API on the dashboard's app, beside the Open Inference Protocol's /v2 (same port, tokens,
limits and error answers, handed in by the dashboard, which mounts both). Paths are TF Serving's
(tensorflow_serving/model_servers/http_rest_api_handler.cc), any other under /v1 its "Malformed request"; status and
metadata are the gRPC services' answers written as TF Serving writes them, and :predict runs the gRPC Predict's checks
through the same served model, with the JSON of rest_json.py. docs/tf_serving.md lists every endpoint."""
from __future__ import annotations

import json
from typing import Annotated

import anyio
import grpc
from fastapi import APIRouter, Depends, Request, Response
from fastapi import Path as FastApiPath
from google.protobuf import json_format, wrappers_pb2
from pydantic import BaseModel
from xlacs.saved_model import DEFAULT_SIGNATURE

from xlacs_server.errors import InvalidRequest, NotFound
from xlacs_server.models import datatypes
from xlacs_server.tensor_sig import TensorSig
from xlacs_server.tfserving import examples, rest_json, servicer, signatures
from xlacs_server.tfserving.apis import (classification_pb2, get_model_metadata_pb2, get_model_status_pb2, model_pb2,
                                         regression_pb2)

INT64_MAX = 2**63 - 1
CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}


class ErrorBody(BaseModel):
    """TF Serving's REST error."""
    error: str


def router(service, *, route_class, request_context, read_body, infer_threads) -> APIRouter:
    """/v1/... over `service`. From the front end that mounts it: `route_class` answers errors as {"error": ...}
    with their HTTP status, `request_context()` is what ServedModel.infer asks of a request, `read_body(request)`
    the body bounded by max_input_bytes, `infer_threads` the limiter of threads blocked in inference."""
    endpoints = Endpoints(service, request_context, read_body, infer_threads)
    api = APIRouter(tags=["tensorflow serving"], route_class=route_class)
    errors = {code: {"model": ErrorBody} for code in (400, 401, 404, 429, 500, 501, 503, 504)}
    # A version is digits (Starlette's int convertor): any other path under /v1 is TF Serving's "Malformed request".
    model_paths = [("/v1/models/{name}", _latest), ("/v1/models/{name}/versions/{version:int}", _versioned),
                   ("/v1/models/{name}/labels/{label}", _labelled)]
    described = (endpoints.status, endpoints.metadata, endpoints.predict)
    for method, suffix, handler in [("GET", "", endpoints.status), ("GET", "/metadata", endpoints.metadata),
                                    ("POST", ":predict", endpoints.predict), ("POST", ":classify", endpoints.classify),
                                    ("POST", ":regress", endpoints.regress)]:
        for path, spec_of in model_paths:
            # Served but left out of the OpenAPI document: the label paths (a label not configured is TF Serving's
            # 400 for a path the document would call valid), and :classify and :regress, whose tf.Example JSON it
            # does not describe (TF Serving parses it before it looks the model up, so any body but a valid one is
            # a 400 the document would call valid).
            api.add_api_route(path + suffix, _bound(handler, spec_of), methods=[method], responses=errors,
                              include_in_schema=spec_of is not _labelled and handler in described,
                              summary=handler.__doc__.split(":")[0].split(".")[0])
    api.add_api_route("/v1/{path:path}", endpoints.malformed, methods=["GET", "POST"], include_in_schema=False)
    return api


def _as_dict(message) -> dict:
    """A message as TF Serving's REST handler prints it: proto field names, fields at their defaults included."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True,
                                     always_print_fields_with_no_presence=True)


def _status_json(answer: get_model_status_pb2.GetModelStatusResponse) -> dict:
    """The status with each error_code named, as TF Serving's enum tensorflow.error.Code prints (its numbers are
    gRPC's; apis/status.proto holds it as an int32)."""
    written = _as_dict(answer)
    for entry in written["model_version_status"]:
        entry["status"]["error_code"] = CODE_NAMES.get(entry["status"]["error_code"], "UNKNOWN")
    return written


def _bound(handler, spec_of):
    """`handler(request, spec)` as an endpoint whose path parameters are those `spec_of` reads."""
    async def endpoint(request: Request, spec=Depends(spec_of)):
        return await handler(request, spec)
    endpoint.__name__ = endpoint.__qualname__ = f"{handler.__name__}_{spec_of.__name__.strip('_')}"
    endpoint.__doc__ = handler.__doc__
    return endpoint


def _latest(name: str) -> model_pb2.ModelSpec:
    return model_pb2.ModelSpec(name=name)


def _versioned(name: str, version: Annotated[int, FastApiPath(ge=0)]) -> model_pb2.ModelSpec:
    if version > INT64_MAX:  # no such version: an int64 names every one
        raise NotFound(f"Servable not found for request: Specific({name}, {version})")
    return model_pb2.ModelSpec(name=name, version=wrappers_pb2.Int64Value(value=version))


def _labelled(name: str, label: str) -> model_pb2.ModelSpec:
    return model_pb2.ModelSpec(name=name, version_label=label)


class Endpoints:
    def __init__(self, service, request_context, read_body, infer_threads):
        self.models, self.max_input_bytes = service.models, service.settings.max_input_bytes
        self.predictions, self.model_service = servicer.PredictionServicer(service), servicer.ModelServicer(service)
        self.request_context, self.read_body, self.infer_threads = request_context, read_body, infer_threads

    async def status(self, request: Request, spec: model_pb2.ModelSpec) -> dict:
        """The model's status: every served version, highest first (or the version named)."""
        return _status_json(self.model_service.GetModelStatus(
            get_model_status_pb2.GetModelStatusRequest(model_spec=spec), None))

    async def metadata(self, request: Request, spec: model_pb2.ModelSpec) -> dict:
        """The model's metadata: its SignatureDefMap, as GetModelMetadata answers it."""
        return _as_dict(self.predictions.GetModelMetadata(get_model_metadata_pb2.GetModelMetadataRequest(
            model_spec=spec, metadata_field=[servicer.SIGNATURE_DEF]), None))

    async def predict(self, request: Request, spec: model_pb2.ModelSpec) -> Response:
        """Predict: TF Serving's JSON in and out; the model's run in a thread, as /v2's infer."""
        body = await self.read_body(request)
        content = await anyio.to_thread.run_sync(self._predict, spec, body, self.request_context(),
                                                 limiter=self.infer_threads)
        return Response(content, media_type="application/json")

    async def classify(self, request: Request, spec: model_pb2.ModelSpec) -> Response:
        """Classify: tf.Examples as TF Serving's JSON in, {"results": [[[label, score], ...], ...]} out."""
        return await self._examples(request, spec, "Classify")

    async def regress(self, request: Request, spec: model_pb2.ModelSpec) -> Response:
        """Regress: tf.Examples as TF Serving's JSON in, {"results": [value, ...]} out."""
        return await self._examples(request, spec, "Regress")

    async def _examples(self, request: Request, spec: model_pb2.ModelSpec, rpc: str) -> Response:
        """The gRPC Classify or Regress on the body's examples, in a thread as :predict's run."""
        body = await self.read_body(request)

        def run(context) -> bytes:
            spec.signature_name, given = examples.from_json(body)
            if rpc == "Classify":
                result = self.predictions.Classify(classification_pb2.ClassificationRequest(
                    model_spec=spec, input=given), context).result
                rows = [[[c.label, c.score] for c in row.classes] for row in result.classifications]
            else:
                result = self.predictions.Regress(regression_pb2.RegressionRequest(model_spec=spec, input=given),
                                                  context).result
                rows = [r.value for r in result.regressions]
            return json.dumps({"results": rows}).encode()
        content = await anyio.to_thread.run_sync(run, self.request_context(), limiter=self.infer_threads)
        return Response(content, media_type="application/json")

    def malformed(self, request: Request, path: str) -> None:
        if request.method == "GET" and path.rstrip("/") == "models":
            raise InvalidRequest("Missing model name in request.")
        raise InvalidRequest(f"Malformed request: {request.method} /v1/{path}")

    def _predict(self, spec: model_pb2.ModelSpec, body: bytes, context) -> bytes:
        """The gRPC Predict's model, signature and alias checks on the body's tensors (whose dtypes the signature
        gives), then the served model's run."""
        model = servicer.model_of(self.models, spec)
        served = []

        def inputs_of(signature_name: str) -> dict[str, TensorSig]:
            served.append(signatures.served(model, signature_name or DEFAULT_SIGNATURE))
            return {m.name: TensorSig(m.name, datatypes.to_numpy(m.datatype, m.name), tuple(m.shape))
                    for m in served[0].inputs}
        predict = rest_json.decode(body, inputs_of, max_input_bytes=self.max_input_bytes)
        servicer.check_aliases(served[0], predict.inputs)
        return rest_json.encode(model.infer(predict.inputs, None, context, served[0].key), predict.format)
