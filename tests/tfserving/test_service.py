"""TF Serving's services on the daemon's port through its own stubs: the health and reflection services name them,
they take the daemon's tokens, and a request that is no PredictRequest is INVALID_ARGUMENT, as for every service."""
from __future__ import annotations

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tests.model_repository import ModelServer, graphdef_model
from xlacs_server.tfserving import tensors
from xlacs_server.tfserving.apis import predict_pb2, prediction_service_pb2_grpc

SERVICES = ("tensorflow.serving.PredictionService", "tensorflow.serving.ModelService")
TIMEOUT_S = 120


def test_health_and_reflection_name_tf_servings_services(tfs_server):
    with grpc.insecure_channel(tfs_server.grpc_address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in SERVICES:
            watch = health.Watch(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT_S)
            assert health_pb2.HealthCheckResponse.SERVING in (answer.status for answer in watch)
            watch.cancel()
        answers = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=TIMEOUT_S)
        assert set(SERVICES) <= {s.name for s in next(answers).list_services_response.service}


def test_malformed_predict_is_invalid_argument(tfs_server):
    with grpc.insecure_channel(tfs_server.grpc_address) as channel:
        call = channel.unary_unary("/tensorflow.serving.PredictionService/Predict")
        with pytest.raises(grpc.RpcError) as error:
            call(b"\x0a\xff", timeout=TIMEOUT_S)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "tensorflow.serving.PredictRequest" in error.value.details()


def test_predict_takes_the_daemon_tokens(tmp_path):
    built = graphdef_model(tmp_path / "models", "keras_gd")
    x = built.inputs(batch=2)["x"]
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "keras_gd"
    request.inputs["x"].CopyFrom(tensors.from_array(x))
    with ModelServer(tmp_path / "models", auth_tokens=("secret",)) as server, \
            grpc.insecure_channel(server.grpc_address) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        with pytest.raises(grpc.RpcError) as error:
            stub.Predict(request, timeout=TIMEOUT_S)
        assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
        answer = stub.Predict(request, timeout=TIMEOUT_S, metadata=(("authorization", "Bearer secret"),))
    np.testing.assert_allclose(tensors.to_array(answer.outputs["Identity"], "Identity"),
                               built.expected({"x": x})["Identity"], rtol=1e-5, atol=1e-5)
