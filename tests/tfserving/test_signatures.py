"""Every signature of a SavedModel answers TF Serving's Predict, gRPC (the official client) and REST (plain HTTP), as
the default one does: outputs compared with TensorFlow calling the loaded SavedModel's signatures, a dynamic batch on
a signature that is not the default, each signature's own inputs, outputs and messages, and the Open Inference
Protocol still serving the config's one signature."""
from __future__ import annotations

import httpx
import numpy as np

from tests.saved_model.models import tf_outputs
from tests.tfserving import client
from tests.tfserving.test_predict import FAILURES, PREDICT


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    return {"a3": rng.uniform(-2, 2, (3, 2)).astype(np.float32), "k3": np.array([1, -2, 3], np.int64),
            "a1": rng.uniform(-2, 2, (1, 2)).astype(np.float32), "k1": np.array([7], np.int64),
            "left": rng.uniform(-2, 2, 3).astype(np.float32), "right": rng.uniform(-2, 2, 3).astype(np.float32),
            "x2": rng.uniform(-2, 2, (2, 3)).astype(np.float32), "v": rng.uniform(-2, 2, (2, 3)).astype(np.float32),
            "a5": np.zeros((5, 2), np.float32), "k5": np.zeros(5, np.int64), "k3f": np.zeros(3, np.float32),
            "left2": np.zeros(2, np.float32)}


def test_every_signature_answers_predict_as_tensorflow_computes_it(tfs_server, tfs_repository, tmp_path):
    repo, arrays = tfs_repository, _arrays()
    cases = [  # sent at once: the two batches of "scale" may be merged by its batcher
        {"model": "signatures", "signature": "scale", "inputs": {"a": "a3", "k": "k3"}},  # a dynamic batch of 3
        {"model": "signatures", "signature": "scale", "inputs": {"a": "a1", "k": "k1"}},
        {"model": "signatures", "signature": "scale", "inputs": {"a": "a3", "k": "k3"}, "output_filter": ["doubled"]},
        {"model": "signatures", "signature": "pair", "inputs": {"left": "left", "right": "right"}},  # no batch dim
        {"model": "signatures", "inputs": {"x": "x2"}},  # the default one, beside them
        {"model": "affine", "signature": "shift", "inputs": {"v": "v"}},  # fixed shape [2, 3], a model without config
    ]
    served = tfs_server.models.model("signatures", "1")
    before = int(served.statistics.snapshot().get("inference_count", 0))
    outputs, answers = client.run(PREDICT, tmp_path, arrays, url=tfs_server.grpc_address, cases=cases)

    for i, case in enumerate(cases):
        path = repo.affine if case["model"] == "affine" else repo.signatures
        signature = case.get("signature", "serving_default")
        want = tf_outputs(path, signature, {alias: arrays[name] for alias, name in case["inputs"].items()})
        want = {alias: want[alias] for alias in case.get("output_filter", want)}
        assert answers[i]["outputs"] == sorted(want), case
        for alias, value in want.items():
            np.testing.assert_allclose(outputs[f"{i}/{alias}"], value, rtol=1e-5, atol=1e-5, err_msg=str(case))
            assert outputs[f"{i}/{alias}"].dtype == value.dtype and outputs[f"{i}/{alias}"].shape == value.shape
        assert answers[i]["model_spec"] == {"name": case["model"], "signature_name": signature, "version": "1"}
    assert answers[2]["fields"] == ["dtype", "int64_val", "tensor_shape"]  # int64 out, as TF Serving writes it
    # The model's statistics count every signature's requests: 3 + 1 + 3 + 1 (pair: no batch dim) + 2 rows.
    assert int(served.statistics.snapshot()["inference_count"]) - before == 10


def test_another_signature_checks_its_own_inputs_and_outputs(tfs_server, tmp_path):
    scale, pair = {"model": "signatures", "signature": "scale"}, {"model": "signatures", "signature": "pair"}
    cases = [
        {**scale, "inputs": {"a": "a3"}},
        {**scale, "inputs": {"a": "a3", "x": "k3"}},
        {**scale, "inputs": {"a": "a3", "k": "k3f"}},
        {**scale, "inputs": {"a": "a5", "k": "k5"}},
        {**pair, "inputs": {"left": "left", "right": "right"}, "output_filter": ["y"]},
        {**pair, "inputs": {"left": "left2", "right": "right"}},
        {"model": "signatures", "signature": "__saved_model_init_op", "inputs": {"x": "x2"}},
        {"model": "signatures", "signature": "nope", "inputs": {"x": "x2"}},
    ]
    _, failures = client.run(FAILURES, tmp_path, _arrays(), url=tfs_server.grpc_address, cases=cases)
    assert [f and f[0] for f in failures] == ["INVALID_ARGUMENT"] * 6 + ["FAILED_PRECONDITION"] * 2, failures
    messages = [f[1] for f in failures]
    assert messages[0].startswith("input size does not match signature: 1!=2 len({a}) != len({a,k}). Sent extra: {}. "
                                  "Missing but required: {k}.")
    assert messages[1].startswith("input tensor alias not found in signature: x. Inputs expected to be in the set "
                                  "{a,k}.")
    assert messages[2].startswith("input 'k': Expects arg to be int64 but float is provided")
    assert messages[3].startswith("input 'a' has a batch of 5; model 'signatures' version 1 signature 'scale' takes 1 "
                                  "to max_batch_size 4")
    assert messages[4].startswith("output tensor alias not found in signature: y Outputs expected to be in the set "
                                  "{product,sum}.")
    assert messages[5].startswith("input 'left' has shape [2]; model 'signatures' version 1 signature 'pair' takes [3]")
    assert messages[6].startswith('Serving signature key "__saved_model_init_op" is TensorFlow\'s own')
    assert messages[7].startswith('Serving signature key "nope" not found.')


def _post(server, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"http://{server.http_address}{path}", json=body, timeout=120)


def test_rest_predict_runs_the_body_signature(tfs_server, tfs_repository):
    arrays = _arrays()
    want = tf_outputs(tfs_repository.signatures, "scale", {"a": arrays["a3"], "k": arrays["k3"]})
    rows = _post(tfs_server, "/v1/models/signatures:predict", {"signature_name": "scale", "instances": [
        {"a": a, "k": k} for a, k in zip(arrays["a3"].tolist(), arrays["k3"].tolist())]})
    assert rows.status_code == 200, rows.text
    got = rows.json()["predictions"]
    np.testing.assert_allclose([r["scaled"] for r in got], want["scaled"], rtol=1e-5, atol=1e-5)
    assert [r["doubled"] for r in got] == want["doubled"].tolist()

    want = tf_outputs(tfs_repository.signatures, "pair", {"left": arrays["left"], "right": arrays["right"]})
    columns = _post(tfs_server, "/v1/models/signatures/versions/1:predict", {"signature_name": "pair", "inputs": {
        "left": arrays["left"].tolist(), "right": arrays["right"].tolist()}})
    assert columns.status_code == 200, columns.text
    for alias in ("sum", "product"):
        np.testing.assert_allclose(columns.json()["outputs"][alias], want[alias], rtol=1e-6)

    missing = _post(tfs_server, "/v1/models/signatures:predict", {"signature_name": "scale", "inputs": {
        "a": arrays["a3"].tolist()}})
    assert missing.status_code == 400 and "k" in missing.json()["error"], missing.text


def test_the_open_inference_protocol_serves_the_configs_signature(tfs_server):
    metadata = httpx.get(f"http://{tfs_server.http_address}/v2/models/signatures", timeout=120).json()
    assert [(t["name"], t["shape"]) for t in metadata["inputs"]] == [("x", [-1, 3])]
    assert [t["name"] for t in metadata["outputs"]] == ["y"]
    refused = _post(tfs_server, "/v2/models/signatures/infer", {"inputs": [
        {"name": "a", "shape": [1, 2], "datatype": "FP32", "data": [1.0, 2.0]}]})
    assert refused.status_code == 400 and "'a'" in refused.json()["error"], refused.text
