"""TensorFlow Serving's REST API (/v1 on the dashboard's port) driven with plain HTTP as TF Serving's docs show it
(`curl -d '{"instances": [...]}' -X POST http://host:port/v1/models/m:predict`) against a real daemon: predictions
compared with TensorFlow's in the row and columnar formats, model status and metadata as TF Serving writes them,
every error with TF Serving's HTTP status and {"error": ...}, and one model answering /v1, /v2 and gRPC Predict."""
from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
from google.protobuf import json_format
from tensorflow.core.protobuf import saved_model_pb2

from tests.model_repository import ModelServer
from tests.saved_model.models import tf_outputs
from tests.tfserving import client


def _post(server, path: str, body) -> httpx.Response:
    content = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return httpx.post(f"http://{server.http_address}{path}", content=content, timeout=120)


def _get(server, path: str) -> httpx.Response:
    return httpx.get(f"http://{server.http_address}{path}", timeout=120)


def _x(batch: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, (batch, 4)).astype(np.float32)


def test_predict_rows_and_columns_match_tensorflow(tfs_server, tfs_repository):
    repo = tfs_repository
    b1, b3, b6 = _x(1, 1), _x(3, 2), _x(6, 3)
    ids = np.random.default_rng(5).integers(0, 10, (2, 3)).astype(np.int32)

    # Batch 1, row format, the latest version (2).
    got = _post(tfs_server, "/v1/models/keras_sm:predict", {"instances": b1.tolist()})
    assert got.status_code == 200, got.text
    np.testing.assert_allclose(got.json()["predictions"], repo.saved.expected({"x": b1}, 2)["output_0"],
                               rtol=1e-5, atol=1e-5)
    # A dynamic batch of 3, columnar, version 1 named in the path and the signature in the body.
    got = _post(tfs_server, "/v1/models/keras_sm/versions/1:predict",
                {"signature_name": "serving_default", "inputs": {"x": b3.tolist()}})
    assert got.status_code == 200, got.text
    np.testing.assert_allclose(got.json()["outputs"], repo.saved.expected({"x": b3}, 1)["output_0"],
                               rtol=1e-5, atol=1e-5)
    # A GraphDef model, a batch of 6 as named instances.
    got = _post(tfs_server, "/v1/models/keras_gd:predict", {"instances": [{"x": row} for row in b6.tolist()]})
    np.testing.assert_allclose(got.json()["predictions"], repo.graphdef.expected({"x": b6})["Identity"],
                               rtol=1e-5, atol=1e-5)
    # Two outputs: an object per instance (row), an object of tensors (columnar).
    want = tf_outputs(repo.affine, "serving_default", {"x": b3})
    rows = _post(tfs_server, "/v1/models/affine:predict", {"instances": b3.tolist()}).json()["predictions"]
    assert [sorted(r) for r in rows] == [["total", "y"]] * 3
    np.testing.assert_allclose([r["y"] for r in rows], want["y"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose([r["total"] for r in rows], want["total"], rtol=1e-5, atol=1e-5)
    columns = _post(tfs_server, "/v1/models/affine:predict", {"inputs": b3.tolist()}).json()["outputs"]
    np.testing.assert_allclose(columns["y"], want["y"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(columns["total"], want["total"], rtol=1e-5, atol=1e-5)
    # int32 in, and the lookup's output, exactly.
    got = _post(tfs_server, "/v1/models/lookup:predict", {"inputs": {"ids": ids.tolist()}}).json()["outputs"]
    np.testing.assert_allclose(got, tf_outputs(repo.lookup, "serving_default", {"ids": ids})["sum"], rtol=1e-6)


def _tf_signatures(path) -> dict:
    """TensorFlow's own reading, printed as TF Serving prints it (defaults included), less SignatureDef.defaults: a
    field newer than xlacs's copy of the proto, empty in these models."""
    model = saved_model_pb2.SavedModel.FromString((path / "saved_model.pb").read_bytes())
    written = {k: json_format.MessageToDict(v, preserving_proto_field_name=True,
                                            always_print_fields_with_no_presence=True)
               for k, v in model.meta_graphs[0].signature_def.items()}
    for signature in written.values():
        assert signature.pop("defaults", {}) == {}
    return written


def test_status_and_metadata_as_tf_serving_writes_them(tfs_server, tfs_repository):
    ok = {"error_code": "OK", "error_message": ""}
    assert _get(tfs_server, "/v1/models/keras_sm").json() == {"model_version_status": [
        {"version": "2", "state": "AVAILABLE", "status": ok}, {"version": "1", "state": "AVAILABLE", "status": ok}]}
    assert _get(tfs_server, "/v1/models/keras_sm/versions/1").json() == {"model_version_status": [
        {"version": "1", "state": "AVAILABLE", "status": ok}]}
    broken = _get(tfs_server, "/v1/models/broken").json()["model_version_status"]
    assert [(s["version"], s["state"], s["status"]["error_code"]) for s in broken] == [("1", "END", "INVALID_ARGUMENT")]

    got = _get(tfs_server, "/v1/models/affine/metadata")
    assert got.status_code == 200 and got.headers["content-type"] == "application/json"
    metadata = got.json()
    assert metadata["model_spec"] == {"name": "affine", "signature_name": "", "version": "1"}
    signature_def = metadata["metadata"]["signature_def"]
    assert signature_def.pop("@type") == "type.googleapis.com/tensorflow.serving.SignatureDefMap"
    assert signature_def == {"signature_def": _tf_signatures(tfs_repository.affine)}
    versioned = _get(tfs_server, "/v1/models/keras_sm/versions/1/metadata").json()
    assert versioned["model_spec"]["version"] == "1"
    assert set(versioned["metadata"]["signature_def"]["signature_def"]) >= {"serving_default"}


ERRORS = [  # (method, path, body), HTTP status, the start of TF Serving's message (or "...": words in xlacs's)
    ("POST", "/v1/models/nope:predict", {"instances": [[1.0]]}, 404, "Servable not found for request: Latest(nope)"),
    ("POST", "/v1/models/keras_sm/versions/7:predict", {"instances": [[1.0] * 4]}, 404,
     "Servable not found for request: Specific(keras_sm, 7)"),
    ("POST", "/v1/models/keras_sm/labels/stable:predict", {"instances": [[1.0] * 4]}, 400,
     "Unrecognized servable version label: stable"),
    ("POST", "/v1/models/keras_sm:predict", {"signature_name": "nope", "instances": [[1.0] * 4]}, 400,
     'Serving signature key "nope" not found.'),
    ("POST", "/v1/models/lookup:predict", {"signature_name": "bump", "instances": [1.0]}, 501,
     "model 'lookup' version 1: signature 'bump' is not served: "),
    ("POST", "/v1/models/affine:predict", {"signature_name": "__saved_model_init_op", "instances": [1.0]}, 400,
     'Serving signature key "__saved_model_init_op" is TensorFlow\'s own'),
    ("POST", "/v1/models/keras_sm:predict", "{not json", 400, "JSON Parse error: Missing a name for object member."),
    ("POST", "/v1/models/keras_sm:predict", {"instances": [[1.0] * 4], "inputs": [[1.0] * 4]}, 400, "JSON Value:"),
    ("POST", "/v1/models/keras_sm:predict", {"examples": []}, 400, "Missing 'inputs' or 'instances' key"),
    ("POST", "/v1/models/keras_sm:predict", {"inputs": {"y": [[1.0] * 4]}}, 400, "Missing named input: x"),
    ("POST", "/v1/models/keras_sm:predict", {"instances": [["a"] * 4]}, 400,
     "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: \"a\" Type: String is "
     "not of expected type: float"),
    ("POST", "/v1/models/keras_sm:predict", {"instances": [[1.0] * 4] * 5}, 400, "...max_batch_size 4"),
    ("POST", "/v1/models/broken:predict", {"instances": [[1.0] * 4]}, 503, "...broken"),
    ("POST", "/v1/models/keras_sm:classify", {"examples": [{"x": 1.0}]}, 400,
     "Expected classification signature method_name to be tensorflow/serving/classify. Was: "
     "tensorflow/serving/predict"),
    ("POST", "/v1/models/keras_sm:explain", {}, 400, "Malformed request: POST /v1/models/keras_sm:explain"),
    ("POST", "/v1/models/keras_sm/versions/one:predict", {}, 400, "Malformed request: POST"),
    ("GET", "/v1/models/nope", None, 404, "Could not find any versions of model nope"),
    ("GET", "/v1/models/keras_sm/versions/9", None, 404, "Could not find version 9 of model keras_sm"),
    ("GET", "/v1/models/keras_sm/labels/stable", None, 400, "Unrecognized servable version label: stable"),
    ("GET", "/v1/models/nope/metadata", None, 404, "Servable not found for request: Latest(nope)"),
    ("GET", "/v1/models/keras_sm/labels/stable/metadata", None, 400, "Unrecognized servable version label"),
    ("GET", "/v1/models", None, 400, "Missing model name in request."),
    ("GET", "/v1/models/keras_sm/extra/path", None, 400, "Malformed request: GET /v1/models/keras_sm/extra/path"),
]


@pytest.mark.parametrize("method, path, body, status, message", ERRORS, ids=[f"{e[0]} {e[1]}" for e in ERRORS])
def test_errors_are_tf_servings(tfs_server, method, path, body, status, message):
    got = _post(tfs_server, path, body) if method == "POST" else _get(tfs_server, path)
    assert got.status_code == status, got.text
    assert list(got.json()) == ["error"]
    error = got.json()["error"]
    assert message[3:] in error if message.startswith("...") else error.startswith(message), error


GRPC_PREDICT = '''
r = predict_pb2.PredictRequest()
r.model_spec.name = "keras_sm"
r.inputs["x"].CopyFrom(tf.make_tensor_proto(arrays["x"]))
reply(arrays={"y": tf.make_ndarray(predict.Predict(r, timeout=120).outputs["output_0"])})
'''


def test_one_model_answers_rest_v1_rest_v2_and_grpc_predict(tfs_server, tfs_repository, tmp_path):
    x = _x(2, 9)
    before = tfs_server.models.model("keras_sm", "2").statistics.snapshot()
    v1 = np.array(_post(tfs_server, "/v1/models/keras_sm:predict", {"instances": x.tolist()}).json()["predictions"],
                  np.float32)
    v2 = _post(tfs_server, "/v2/models/keras_sm/infer", {"inputs": [
        {"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}]}).json()
    v2 = np.array(v2["outputs"][0]["data"], np.float32).reshape(v2["outputs"][0]["shape"])
    by_grpc, _ = client.run(GRPC_PREDICT, tmp_path, {"x": x}, url=tfs_server.grpc_address)
    np.testing.assert_allclose(v1, tfs_repository.saved.expected({"x": x}, 2)["output_0"], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(v1, v2)  # JSON's shortest round-trip decimals read back as the same float32
    np.testing.assert_array_equal(v1, by_grpc["y"])
    after = tfs_server.models.model("keras_sm", "2").statistics.snapshot()
    assert int(after.get("inference_count", 0)) - int(before.get("inference_count", 0)) == 6  # 2 rows each


def test_tokens_and_the_input_limit_guard_v1(tfs_repository):
    with ModelServer(tfs_repository.path, auth_tokens=("v1-token",), max_input_bytes=1024) as server:
        refused = _get(server, "/v1/models/keras_sm")
        assert refused.status_code == 401 and "Bearer" in refused.json()["error"]
        url = f"http://{server.http_address}/v1/models/keras_sm:predict"
        headers = {"Authorization": "Bearer v1-token"}
        ok = httpx.post(url, json={"instances": [[0.5] * 4]}, headers=headers, timeout=120)
        assert ok.status_code == 200, ok.text
        # 1024 bytes of inputs at most: TF Serving's RESOURCE_EXHAUSTED, HTTP 429, naming the setting.
        big = httpx.post(url, json={"inputs": [[0.5] * 4] * 100}, headers=headers, timeout=120)
        assert big.status_code == 429 and "max_input_bytes" in big.json()["error"], big.text
