"""TensorFlow Serving's gRPC services on the daemon's port, beside the Open Inference Protocol's (same interceptors:
tokens, limits, errors as statuses). The RPCs translate TF Serving's messages and call service.models, so one served
model answers both APIs through the same batcher and statistics. Checks and messages follow TF Serving's
(tensorflow_serving/servables/tensorflow/predict_util.cc, get_model_metadata_impl.cc, get_model_status_impl.cc,
model_servers/model_service_impl.cc and server_core.cc for labels and reloads; Classify, Regress and MultiInference:
classify.py); docs/tf_serving.md maps every RPC and field."""
from __future__ import annotations

import grpc
from google.protobuf import wrappers_pb2
from xlacs import dtypes
from xlacs.saved_model import DEFAULT_SIGNATURE

from xlacs_server.errors import InvalidRequest, LimitExceeded, NotFound, Unimplemented, XlacsError
from xlacs_server.models import datatypes
from xlacs_server.models.model import LOADING, READY, UNLOADING, ready
from xlacs_server.tfserving import classify, signatures, tensors
from xlacs_server.tfserving.apis import (classification_pb2, get_model_metadata_pb2, get_model_status_pb2,
                                         inference_pb2, model_management_pb2, model_pb2, model_service_pb2,
                                         model_service_pb2_grpc, predict_pb2, prediction_service_pb2,
                                         prediction_service_pb2_grpc, regression_pb2)

PREDICTION_SERVICE = prediction_service_pb2.DESCRIPTOR.services_by_name["PredictionService"].full_name
MODEL_SERVICE = model_service_pb2.DESCRIPTOR.services_by_name["ModelService"].full_name
SIGNATURE_DEF = "signature_def"  # the one metadata_field TF Serving answers
_STATUS = get_model_status_pb2.ModelVersionStatus
STATES = {READY: _STATUS.AVAILABLE, LOADING: _STATUS.LOADING, UNLOADING: _STATUS.UNLOADING}  # UNAVAILABLE: END



def add_to_server(service, server: grpc.Server) -> tuple[str, str]:
    """Registers both services over `service` (the Daemon); their full names, for health and reflection."""
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(PredictionServicer(service), server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelServicer(service), server)
    return PREDICTION_SERVICE, MODEL_SERVICE


def version_of(models, spec: model_pb2.ModelSpec) -> str:
    """The version a ModelSpec names: its version, or its version_label's (TF Serving's models.config labels);
    "" for none (the latest). One of the two at most: they are a oneof, whose last one on the wire wins."""
    choice = spec.WhichOneof("version_choice")
    if choice == "version_label":
        labels = models.labels(spec.name)
        if spec.version_label not in labels:
            raise InvalidRequest(f"Unrecognized servable version label: {spec.version_label}")
        return str(labels[spec.version_label])
    return str(spec.version.value) if choice == "version" else ""


def model_of(models, spec: model_pb2.ModelSpec):
    """The served version a ModelSpec names (the highest READY one without a version), with TF Serving's errors."""
    version = version_of(models, spec)
    try:
        return models.model(spec.name, version)
    except NotFound as e:
        wanted = f"Specific({spec.name}, {version})" if version else f"Latest({spec.name})"
        raise NotFound(f"Servable not found for request: {wanted}: {e}") from None


def check_aliases(signature, given) -> None:
    """TF Serving's errors for request inputs (by alias) that are not exactly the signature's (gRPC and REST)."""
    expected = {m.name for m in signature.inputs}
    if set(given) == expected:
        return
    sent, wanted = sorted(given), sorted(expected)
    if len(given) != len(expected):
        raise InvalidRequest(
            f"input size does not match signature: {len(given)}!={len(expected)} len({{{','.join(sent)}}}) "
            f"!= len({{{','.join(wanted)}}}). Sent extra: {{{','.join(sorted(set(sent) - set(wanted)))}}}. "
            f"Missing but required: {{{','.join(sorted(set(wanted) - set(sent)))}}}.")
    alias = next(a for a in sent if a not in expected)
    raise InvalidRequest(f"input tensor alias not found in signature: {alias}. Inputs expected to be in the "
                         f"set {{{','.join(wanted)}}}.")


def _spec(request):
    if not request.HasField("model_spec"):
        raise InvalidRequest("Missing ModelSpec")
    return request.model_spec


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, service):
        self.models = service.models
        self.max_input_bytes = service.settings.max_input_bytes

    def Predict(self, request, context):
        spec = _spec(request)
        model = model_of(self.models, spec)
        signature = signatures.served(model, spec.signature_name or DEFAULT_SIGNATURE)
        inputs = self._inputs(signature, request.inputs)
        wanted = self._outputs(signature, request.output_filter)
        outputs = model.infer(inputs, wanted, context, signature.key)
        answer = predict_pb2.PredictResponse(model_spec=_echo(spec, signature.key, model))
        for alias, array in outputs.items():
            answer.outputs[alias].CopyFrom(tensors.from_array(array))
        return answer

    def _inputs(self, signature, given) -> dict:
        """The request's tensors by alias, checked as TF Serving checks them: the signature's aliases exactly, each
        tensor parsing, each of the signature's dtype; at most max_input_bytes together."""
        check_aliases(signature, given)
        expected = {m.name: m for m in signature.inputs}
        arrays, size = {}, 0
        for alias in sorted(given):
            array = tensors.to_array(given[alias], alias)
            want = datatypes.to_numpy(expected[alias].datatype, alias)
            if array.dtype != want:
                expects = tensors.type_name(dtypes.from_numpy(want))
                raise InvalidRequest(f"input {alias!r}: Expects arg to be {expects} but "
                                     f"{tensors.type_name(given[alias].dtype)} is provided")
            size += array.nbytes
            if size > self.max_input_bytes:
                raise LimitExceeded(f"the request's inputs have {size} bytes or more", "max_input_bytes",
                                    self.max_input_bytes)
            arrays[alias] = array
        return arrays

    @staticmethod
    def _outputs(signature, output_filter) -> list[str] | None:
        """The aliases of output_filter, checked; None (every output of the signature) when it is empty."""
        names = sorted(m.name for m in signature.outputs)
        seen = []
        for alias in output_filter:
            if alias not in names:
                raise InvalidRequest(f"output tensor alias not found in signature: {alias} Outputs expected to be "
                                     f"in the set {{{','.join(names)}}}.")
            if alias in seen:
                raise InvalidRequest(f"duplicate output tensor alias: {alias}")
            seen.append(alias)
        return seen or None

    def GetModelMetadata(self, request, context):
        """metadata "signature_def": the model's SignatureDefMap packed in an Any, as TF Serving answers it."""
        spec = _spec(request)
        if not request.metadata_field:
            raise InvalidRequest("GetModelMetadataRequest must specify at least one metadata_field")
        for field in request.metadata_field:
            if field != SIGNATURE_DEF:
                raise InvalidRequest(f"Metadata field {field} is not supported")
        model = ready(model_of(self.models, spec))
        answer = get_model_metadata_pb2.GetModelMetadataResponse(model_spec=model_pb2.ModelSpec(
            name=spec.name, version=wrappers_pb2.Int64Value(value=int(model.version))))
        answer.metadata[SIGNATURE_DEF].Pack(
            get_model_metadata_pb2.SignatureDefMap(signature_def=signatures.signature_defs(model)))
        return answer

    def Classify(self, request, context):
        spec = _spec(request)
        model = model_of(self.models, spec)
        key = classify.signature(model, spec.signature_name, classify.CLASSIFY_METHOD)
        result = classify.classify(model, key, request.input, context, self.max_input_bytes)
        return classification_pb2.ClassificationResponse(model_spec=_echo(spec, key, model), result=result)

    def Regress(self, request, context):
        spec = _spec(request)
        model = model_of(self.models, spec)
        key = classify.signature(model, spec.signature_name, classify.REGRESS_METHOD)
        result = classify.regress(model, key, request.input, context, self.max_input_bytes)
        return regression_pb2.RegressionResponse(model_spec=_echo(spec, key, model), result=result)

    def MultiInference(self, request, context):
        """Classify and Regress tasks of one model on one Input, checked as TF Serving's multi_inference.cc."""
        spec = request.tasks[0].model_spec if request.tasks else model_pb2.ModelSpec()
        model = model_of(self.models, spec)
        keys = []
        for task in request.tasks:
            if not task.model_spec.name:
                raise InvalidRequest("Found ModelSpec with an empty model name.")
            if task.model_spec.name != spec.name:
                raise InvalidRequest("All ModelSpecs in a MultiInferenceRequest must access the same model name.")
            key = task.model_spec.signature_name or DEFAULT_SIGNATURE
            if key in keys:
                raise InvalidRequest(f"Duplicate evaluation of signature: {key}")
            if key not in signatures.signature_defs(model):
                raise InvalidRequest(f"Requested signature not found in model graph: {key}")
            if task.method_name not in (classify.CLASSIFY_METHOD, classify.REGRESS_METHOD):
                raise Unimplemented(f"Unsupported signature method_name: {task.method_name}")
            keys.append(classify.signature(model, key, task.method_name))
        answer = inference_pb2.MultiInferenceResponse()
        for task, key in zip(request.tasks, keys):
            result = answer.results.add(model_spec=_echo(task.model_spec, key, model))
            if task.method_name == classify.CLASSIFY_METHOD:
                result.classification_result.CopyFrom(
                    classify.classify(model, key, request.input, context, self.max_input_bytes))
            else:
                result.regression_result.CopyFrom(
                    classify.regress(model, key, request.input, context, self.max_input_bytes))
        return answer


def _echo(spec, key: str, model) -> model_pb2.ModelSpec:
    """The ModelSpec TF Serving answers: the name, the signature that ran and the version."""
    return model_pb2.ModelSpec(name=spec.name, signature_name=key, version=wrappers_pb2.Int64Value(
        value=int(model.version)))


class ModelServicer(model_service_pb2_grpc.ModelServiceServicer):
    def __init__(self, service):
        self.models = service.models

    def GetModelStatus(self, request, context):
        """Every served version of the model (or the one named), highest first, with TF Serving's states: READY is
        AVAILABLE, a failed load END with its error."""
        spec = _spec(request)
        version = version_of(self.models, spec)  # a label's version: TF Serving's lists every version instead
        listed = [s for s in self.models.index() if s.name == spec.name and s.version]
        if not listed:
            reason = next((s.reason for s in self.models.index() if s.name == spec.name), "")
            raise NotFound(f"Could not find any versions of model {spec.name}" + (f": {reason}" if reason else ""))
        if version:
            listed = [s for s in listed if s.version == version]
            if not listed:
                raise NotFound(f"Could not find version {version} of model {spec.name}")
        answer = get_model_status_pb2.GetModelStatusResponse()
        for status in sorted(listed, key=lambda s: -int(s.version)):
            entry = answer.model_version_status.add(version=int(status.version),
                                                    state=STATES.get(status.state, _STATUS.END))
            entry.status.SetInParent()  # OK, written as TF Serving writes it: present, empty
            if status.state not in STATES:
                entry.status.error_code = self._code(status).value[0]
                entry.status.error_message = status.reason
        return answer

    def _code(self, status) -> grpc.StatusCode:
        """The status code of a version's failed load (UNKNOWN for an error that is not one of xlacs's)."""
        try:
            failure = self.models.model(status.name, status.version).failure
        except XlacsError:
            return grpc.StatusCode.UNKNOWN
        return failure.code if isinstance(failure, XlacsError) else grpc.StatusCode.UNKNOWN

    def HandleReloadConfigRequest(self, request, context):
        """Serves the models of request.config (TF Serving's ReloadConfig: models.config's models added, removed,
        reloaded, labels moved), answering its status as TF Serving does: the call's status, and OK in the
        response. metric_names: xlacs keeps none of TensorFlow's monitoring metrics, and answers each with an
        increase of 0, as TF Serving answers a metric it does not collect."""
        self.models.reconfigure(request.config)
        answer = model_management_pb2.ReloadConfigResponse(
            metric=[model_management_pb2.Metric(name=name, int64_value_increase=0) for name in request.metric_names])
        answer.status.SetInParent()  # OK, present, as TF Serving writes it
        return answer
