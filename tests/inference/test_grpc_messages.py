"""The protocol's gRPC messages that tritonclient does not send, through the daemon's own generated stubs on a real
daemon: typed InferTensorContents, raw_input_contents that do not fit, the index of READY versions, the health and
reflection services naming inference.GRPCInferenceService, tokens, and a stream its client cancels."""
from __future__ import annotations

import queue
import threading
import time

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tests.model_repository import ModelServer, graphdef_model
from xlacs_server.inference.v2 import grpc_service_pb2 as pb, grpc_service_pb2_grpc

SERVICE = "inference.GRPCInferenceService"
TIMEOUT_S = 120


@pytest.fixture(scope="module")
def stub(model_server):
    with grpc.insecure_channel(model_server.grpc_address) as channel:
        yield grpc_service_pb2_grpc.GRPCInferenceServiceStub(channel)


def request_of(x: np.ndarray, **fields) -> pb.ModelInferRequest:
    return pb.ModelInferRequest(model_name="keras_gd", inputs=[
        pb.ModelInferRequest.InferInputTensor(name="x", datatype="FP32", shape=x.shape, **fields)])


def test_typed_contents_match_tensorflow(stub, model_repository):
    built = model_repository.batching
    inputs = built.inputs(batch=3)
    answer = stub.ModelInfer(request_of(inputs["x"], contents=pb.InferTensorContents(
        fp32_contents=inputs["x"].ravel())), timeout=TIMEOUT_S)
    (output,) = answer.outputs
    assert (output.name, output.datatype, list(output.shape)) == ("Identity", "FP32", [3, 3])
    got = np.frombuffer(answer.raw_output_contents[0], np.float32).reshape(3, 3)
    np.testing.assert_allclose(got, built.expected(inputs)["Identity"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fields, says", [
    ({"contents": pb.InferTensorContents(fp32_contents=[1.0] * 7)}, "contents.fp32_contents has 7 elements; "
                                                                    "shape [2, 4] takes 8"),
    ({"contents": pb.InferTensorContents(int_contents=[1] * 8)}, "typed contents are fp32_contents, not "
                                                                 "int_contents"),
    ({"raw": [b"\0" * 31]}, "input 'x': raw_input_contents has 31 bytes; shape [2, 4] of FP32 takes 32"),
    ({"raw": [b"\0" * 32, b"\0" * 32]}, "raw_input_contents has 2 entries for 1 inputs"),
    ({"raw": [b"\0" * 32], "contents": pb.InferTensorContents(fp32_contents=[1.0] * 8)}, "has both contents and "
                                                                                        "raw_input_contents"),
    ({"raw": [b"\0" * 32], "parameters": {"binary_data_output": pb.InferParameter(bool_param=True)}},
     "no parameter 'binary_data_output'"),
    ({"raw": [b"\0" * 32], "parameters": {"timeout": pb.InferParameter(string_param="1s")}},
     "must be a positive number of microseconds"),
])
def test_malformed_tensors_are_refused_naming_what_is_wrong(stub, fields, says):
    x = np.zeros((2, 4), np.float32)
    request = request_of(x, **({"contents": fields["contents"]} if "contents" in fields else {}))
    request.raw_input_contents.extend(fields.get("raw", []))
    for name, value in fields.get("parameters", {}).items():
        request.parameters[name].CopyFrom(value)
    with pytest.raises(grpc.RpcError) as error:
        stub.ModelInfer(request, timeout=TIMEOUT_S)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT and says in error.value.details()


def test_typed_integer_contents_out_of_range_and_half_floats_are_refused(stub):
    request = pb.ModelInferRequest(model_name="keras_gd", inputs=[pb.ModelInferRequest.InferInputTensor(
        name="x", datatype="INT8", shape=[2], contents=pb.InferTensorContents(int_contents=[1, 300]))])
    with pytest.raises(grpc.RpcError) as error:
        stub.ModelInfer(request, timeout=TIMEOUT_S)
    assert "input 'x': contents.int_contents holds values outside INT8's range -128 to 127" in error.value.details()
    request.inputs[0].datatype = "FP16"
    with pytest.raises(grpc.RpcError) as error:
        stub.ModelInfer(request, timeout=TIMEOUT_S)
    assert "input 'x' is FP16, which has no typed contents: send it in raw_input_contents" in error.value.details()


def test_index_of_ready_versions_and_one_repository(stub):
    ready = stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True), timeout=TIMEOUT_S)
    assert sorted((m.name, m.version, m.state) for m in ready.models) == [
        ("keras_gd", "1", "READY"), ("keras_sm", "2", "READY"), ("keras_static", "1", "READY")]
    assert stub.ServerReady(pb.ServerReadyRequest(), timeout=TIMEOUT_S).ready
    with pytest.raises(grpc.RpcError) as error:
        stub.RepositoryIndex(pb.RepositoryIndexRequest(repository_name="other"), timeout=TIMEOUT_S)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "xlacs serves one repository" in \
        error.value.details()


def test_health_and_reflection_name_the_inference_service(model_server):
    with grpc.insecure_channel(model_server.grpc_address) as channel:
        # SERVING once the repository has loaded, which the readiness thread reports as soon as it wakes.
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=SERVICE),
                                                          timeout=TIMEOUT_S)
        assert health_pb2.HealthCheckResponse.SERVING in (answer.status for answer in watch)
        watch.cancel()
        answers = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=TIMEOUT_S)
        assert SERVICE in {s.name for s in next(answers).list_services_response.service}


def test_the_inference_service_takes_the_daemon_tokens(tmp_path):
    built = graphdef_model(tmp_path / "models", "keras_gd")
    inputs = built.inputs(batch=2)
    with ModelServer(tmp_path / "models", auth_tokens=("secret",)) as server, \
            grpc.insecure_channel(server.grpc_address) as channel:
        stub = grpc_service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = request_of(inputs["x"])
        request.raw_input_contents.append(inputs["x"].tobytes())
        with pytest.raises(grpc.RpcError) as error:
            stub.ModelInfer(request, timeout=TIMEOUT_S)
        assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
        answer = stub.ModelInfer(request, timeout=TIMEOUT_S, metadata=[("authorization", "Bearer secret")])
    got = np.frombuffer(answer.raw_output_contents[0], np.float32).reshape(2, 3)
    np.testing.assert_allclose(got, built.expected(inputs)["Identity"], rtol=1e-5, atol=1e-5)


def test_a_stream_the_client_cancels_leaves_no_reader_behind(model_server, model_repository):
    """A ModelStreamInfer stream whose client goes away mid-stream: the daemon's thread reading its requests ends
    (inference/stream_infer.py), and the daemon still answers others."""
    def readers() -> int:
        return sum(t.name == "stream-requests" for t in threading.enumerate())
    before = readers()
    x = model_repository.batching.inputs(batch=2)["x"]
    sent = queue.Queue()
    for _ in range(3):
        request = request_of(x)
        request.raw_input_contents.append(x.tobytes())
        sent.put(request)

    hang_up = threading.Event()

    def requests():  # three requests, then the client waits without closing its side
        for _ in range(3):
            yield sent.get()
        hang_up.wait(60)
    with grpc.insecure_channel(model_server.grpc_address) as channel:
        answers = grpc_service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelStreamInfer(requests(),
                                                                                           timeout=TIMEOUT_S)
        got = [next(answers) for _ in range(3)]
        assert [a.error_message for a in got] == [""] * 3 and readers() == before + 1
        answers.cancel()
        hang_up.set()
    deadline = time.monotonic() + 30
    while readers() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert readers() == before
    with grpc.insecure_channel(model_server.grpc_address) as channel:
        stub = grpc_service_pb2_grpc.GRPCInferenceServiceStub(channel)
        assert stub.ServerReady(pb.ServerReadyRequest(), timeout=TIMEOUT_S).ready
