"""The Open Inference Protocol over gRPC: Triton's inference.GRPCInferenceService on the daemon's gRPC port, beside
the Compiler service (same interceptors: tokens, errors as statuses). The RPCs translate messages and call
service.models (models/repository.py); the shared-memory, trace and log RPCs answer UNIMPLEMENTED saying what xlacs
offers instead. docs/inference.md lists them."""
from __future__ import annotations

import logging
import time

import grpc
from google.protobuf import json_format

from xlacs_server import version as xlacs_version
from xlacs_server.errors import InvalidRequest, NotFound, Unavailable, Unimplemented, XlacsError
from xlacs_server.inference import EXTENSIONS, grpc_tensors, infer_request, parameters, statistics_of
from xlacs_server.inference.stream_infer import StreamRuns
from xlacs_server.inference.v2 import grpc_service_pb2 as pb, grpc_service_pb2_grpc
from xlacs_server.models.model import READY, ready

log = logging.getLogger(__name__)

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"].full_name
_SHARED_MEMORY = parameters.OFFERED_INSTEAD["shared_memory_region"]
NOT_OFFERED = {  # the service's RPCs xlacs does not offer -> what it offers instead
    **{f"{kind}SharedMemory{call}": _SHARED_MEMORY for kind in ("System", "Cuda")
       for call in ("Status", "Register", "Unregister")},
    "TraceSetting": "xlacs has no request tracing: per-model queue and compute times are in ModelStatistics and the "
                    "xlacs_model_* series of /metrics",
    "LogSettings": "xlacs logs to its standard error at INFO, set when it starts; it changes no log setting by RPC",
}


class InferenceServicer(grpc_service_pb2_grpc.GRPCInferenceServiceServicer):
    def __init__(self, service):
        self.service = service
        self.models = service.models
        # As many threads as the transport has: a stream's requests wait in batchers on them, as unary ones on gRPC's.
        self.stream_runs = StreamRuns(service.settings.workers, service.settings.max_input_bytes)

    # --- Health and metadata ---------------------------------------------------------------------

    def ServerLive(self, request, context):
        return pb.ServerLiveResponse(live=True)

    def ServerReady(self, request, context):
        """Ready as REST's /v2/health/ready: the daemon takes requests and the repository's initial load has ended."""
        return pb.ServerReadyResponse(ready=not self.service.unready(models=True))

    def ModelReady(self, request, context):
        """Whether the version (the highest ready one without a version) is READY: an unknown model is not."""
        try:
            return pb.ModelReadyResponse(ready=self.models.model(request.name, request.version).state == READY)
        except (NotFound, Unavailable):
            return pb.ModelReadyResponse(ready=False)

    def ServerMetadata(self, request, context):
        return pb.ServerMetadataResponse(name="xlacs", version=xlacs_version.VERSION, extensions=EXTENSIONS)

    def ModelMetadata(self, request, context):
        return json_format.ParseDict(infer_request.metadata_of(self.models, request.name, request.version),
                                     pb.ModelMetadataResponse())

    def ModelConfig(self, request, context):
        """The config as served (a SavedModel's inputs and outputs filled in from its signature)."""
        return pb.ModelConfigResponse(config=self._ready(request.name, request.version).config)

    def ModelStatistics(self, request, context):
        """Every served version's statistics; those of one model (name), or of one version (name, version)."""
        return json_format.ParseDict({"model_stats": statistics_of(self.models, request.name, request.version)},
                                     pb.ModelStatisticsResponse())

    # --- Inference -------------------------------------------------------------------------------

    def ModelInfer(self, request, context):
        return self._infer(request, context)

    def ModelStreamInfer(self, request_iterator, context):
        """One answer per request, in the order sent (as Triton answers a stream to a model that is not decoupled);
        a request's error is its answer's error_message (as Triton sends it) and the stream goes on. The requests
        run as they come (inference/stream_infer.py), so a dynamic batcher merges them."""
        return self.stream_runs.answers(request_iterator, lambda request: self._stream_answer(request, context),
                                        lambda request: request.ByteSize())

    def _stream_answer(self, request, context) -> pb.ModelStreamInferResponse:
        try:
            return pb.ModelStreamInferResponse(infer_response=self._infer(request, context))
        except XlacsError as e:
            if e.code == grpc.StatusCode.INTERNAL:
                raise  # a bug of xlacs: the stream ends INTERNAL, logged with its traceback
            log.info("stream request %r to model %r: %s %s", request.id, request.model_name, e.code.name, e)
            return pb.ModelStreamInferResponse(error_message=str(e), infer_response=pb.ModelInferResponse(
                model_name=request.model_name, model_version=request.model_version, id=request.id))

    def _infer(self, request, context) -> pb.ModelInferResponse:
        model = self.models.model(request.model_name, request.model_version)
        parsed = grpc_tensors.parse(request, self.service.settings.max_input_bytes)
        outputs = model.infer(parsed.inputs, parsed.outputs, Deadline(context, parsed.timeout_s))
        return grpc_tensors.response(model, request.id, outputs)

    # --- Model repository ------------------------------------------------------------------------

    def RepositoryIndex(self, request, context):
        """Every model directory's versions, with state and reason; ready=true keeps the READY ones."""
        self._one_repository(request.repository_name)
        index = pb.RepositoryIndexResponse.ModelIndex
        return pb.RepositoryIndexResponse(models=[
            index(name=s.name, version=s.version, state=s.state, reason=s.reason) for s in self.models.index()
            if not request.ready or s.state == READY])

    def RepositoryModelLoad(self, request, context):
        """(Re)loads the model, returning once every version has been tried; parameter "config" (its JSON)
        replaces config.pbtxt."""
        self._one_repository(request.repository_name)
        if any(key.startswith("file:") for key in request.parameters):
            raise Unimplemented("RepositoryModelLoad: the \"file:\" parameters are not offered; xlacs loads models "
                                "from its repository directory: put the files in <repository>/<model>/<version>/")
        options = parameters.check(grpc_tensors.parameter_values(request.parameters), ("config",),
                                   "RepositoryModelLoad")
        config = options.get("config", "")
        if not isinstance(config, str):
            raise InvalidRequest("RepositoryModelLoad: parameter 'config' must be a string_param holding the model "
                                 "config's JSON")
        self.models.load(request.model_name, config)
        return pb.RepositoryModelLoadResponse()

    def RepositoryModelUnload(self, request, context):
        """UNLOADING: requests in flight finish, then the model is gone. xlacs has no ensembles, so no model
        depends on another: "unload_dependents" has nothing more to unload."""
        self._one_repository(request.repository_name)
        options = parameters.check(grpc_tensors.parameter_values(request.parameters), ("unload_dependents",),
                                   "RepositoryModelUnload")
        parameters.flag(options, "unload_dependents", "RepositoryModelUnload")
        self.models.unload(request.model_name)
        return pb.RepositoryModelUnloadResponse()

    # --- Helpers ---------------------------------------------------------------------------------

    def _ready(self, name: str, version: str):
        return ready(self.models.model(name, version))

    def _one_repository(self, repository_name: str) -> None:
        if repository_name:
            raise InvalidRequest(f"repository_name {repository_name!r}: xlacs serves one repository (its "
                                 "--model-repository); leave repository_name empty")


def _not_offered(rpc: str, instead: str):
    def answer(self, request, context):
        raise Unimplemented(f"{rpc} is not offered: {instead}")
    answer.__name__ = rpc
    return answer


for _rpc, _instead in NOT_OFFERED.items():
    setattr(InferenceServicer, _rpc, _not_offered(_rpc, _instead))


class Deadline:
    """A request's context for ServedModel.infer: the gRPC call's, its deadline shortened by the request's "timeout"
    parameter when one is given (tritonclient's `timeout`, apart from its client_timeout, the gRPC deadline)."""

    def __init__(self, context, timeout_s: float | None):
        self.context = context
        self.deadline = None if timeout_s is None else time.monotonic() + timeout_s

    def time_remaining(self) -> float | None:
        remaining = self.context.time_remaining()
        if self.deadline is None:
            return remaining
        left = max(0.0, self.deadline - time.monotonic())
        return left if remaining is None else min(left, remaining)

    def is_active(self) -> bool:
        return self.context.is_active()
