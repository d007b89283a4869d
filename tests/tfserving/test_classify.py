"""Classify, Regress and MultiInference (gRPC, through TF Serving's official stubs) and REST :classify and :regress on
Estimator-style SavedModels (tests/tfserving/estimator.py): the examples parsed on the host, the features run by the
compiled program, the results compared with TensorFlow's run of the same signature on the same serialized examples;
and TF Serving's errors, with TensorFlow's parse messages."""
from __future__ import annotations

import gzip

import httpx
import numpy as np
import pytest
import tensorflow as tf

from tests.model_repository import ModelServer
from tests.tfserving import client, estimator
from tests.tfserving.estimator import example

TIMEOUT_S = 120
ROWS = [dict(x=[0.5, -1.0, 2.0], n=1), dict(x=[1.5, 0.25, -0.5]), dict(x=[-2.0, 1.0, 0.0], n=4),
        dict(x=[0.0, 0.0, 1.0], n=0), dict(x=[3.0, -3.0, 1.0]), dict(x=[0.1, 0.2, 0.3], n=7)]
SERIALIZED = [example(**row) for row in ROWS]  # six: more than the default max_batch_size, 4


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    repo = tmp_path_factory.mktemp("estimator-models")
    paths = {name: estimator.build(repo / name / "1" / "model.savedmodel", head, **kw) for name, head, kw in [
        ("classifier", "classifier", {}), ("ids", "classifier", {"labels": None}),
        ("regressor", "regressor", {}), ("class_ids", "class_ids", {}),
        ("sparse", "classifier", {"features": {**estimator.FEATURES, "tags": tf.io.VarLenFeature(tf.string)}}),
        ("as_regression", "classifier", {})]}
    (repo / "as_regression" / "config.pbtxt").write_text(
        'parameters { key: "TF_SIGNATURE_DEF" value { string_value: "regression" } }\n')
    with ModelServer(repo) as server:
        yield server, paths


CALL = '''
def input_of(request):
    for e in args["examples"]:
        request.input.example_list.examples.add().ParseFromString(bytes.fromhex(e))
    return request
def classify(name, signature=""):
    r = input_of(classification_pb2.ClassificationRequest())
    r.model_spec.name, r.model_spec.signature_name = name, signature
    return as_dict(predict.Classify(r, timeout=120))
def regress(name, signature=""):
    r = input_of(regression_pb2.RegressionRequest())
    r.model_spec.name, r.model_spec.signature_name = name, signature
    return as_dict(predict.Regress(r, timeout=120))
'''


def _classes(answer) -> tuple[list, np.ndarray]:
    rows = answer["result"]["classifications"]
    return ([[c.get("label", "") for c in r["classes"]] for r in rows],
            np.array([[c.get("score", 0.0) for c in r["classes"]] for r in rows], np.float32))


def test_classify_answers_what_tensorflow_computes(models, tmp_path):
    server, paths = models
    _, got = client.run(CALL + '''
reply(result={"classifier": classify("classifier"), "ids": classify("ids", "serving_default")})''',
                        tmp_path, url=server.grpc_address, examples=[e.hex() for e in SERIALIZED])
    for name in ("classifier", "ids"):
        want = estimator.run(paths[name], "serving_default", SERIALIZED)
        labels, scores = _classes(got[name])
        assert labels == [[c.decode() for c in row] for row in want["classes"]]
        np.testing.assert_allclose(scores, want["scores"], rtol=1e-5, atol=1e-6)
        assert got[name]["model_spec"] == {"name": name, "signature_name": "serving_default", "version": "1"}


def test_regress_answers_what_tensorflow_computes(models, tmp_path):
    server, paths = models
    _, got = client.run(CALL + '''
reply(result={"regressor": regress("regressor"), "as_regression": regress("as_regression", "regression")})''',
                        tmp_path, url=server.grpc_address, examples=[e.hex() for e in SERIALIZED])
    for name, key in (("regressor", "serving_default"), ("as_regression", "regression")):
        want = estimator.run(paths[name], key, SERIALIZED)["outputs"].reshape(-1)
        np.testing.assert_allclose([r["value"] for r in got[name]["result"]["regressions"]], want, rtol=1e-5,
                                   atol=1e-5)
        assert got[name]["model_spec"]["signature_name"] == key


CONTEXT = '''
r = classification_pb2.ClassificationRequest()
r.model_spec.name = "classifier"
listed = r.input.example_list_with_context
listed.context.ParseFromString(bytes.fromhex(args["context"]))
for e in args["examples"]:
    listed.examples.add().ParseFromString(bytes.fromhex(e))
reply(result=as_dict(predict.Classify(r, timeout=120)))
'''


def test_a_context_is_merged_into_each_example_and_the_example_wins(models, tmp_path):
    server, paths = models
    context = example(x=[9.0, 9.0, 9.0], n=5)
    own = [example(n=1), example(x=[1.0, 2.0, 3.0])]
    _, got = client.run(CONTEXT, tmp_path, url=server.grpc_address, context=context.hex(),
                        examples=[e.hex() for e in own])
    want = estimator.run(paths["classifier"], "serving_default", [context + e for e in own])
    np.testing.assert_allclose(_classes(got)[1], want["scores"], rtol=1e-5, atol=1e-6)
    assert not np.allclose(want["scores"][0], want["scores"][1])


MULTI = '''
r = inference_pb2.MultiInferenceRequest()
for e in args["examples"]:
    r.input.example_list.examples.add().ParseFromString(bytes.fromhex(e))
for name, signature, method in args["tasks"]:
    task = r.tasks.add(method_name=method)
    task.model_spec.name, task.model_spec.signature_name = name, signature
try:
    reply(result=as_dict(predict.MultiInference(r, timeout=120)))
except grpc.RpcError as e:
    reply(result=[e.code().name, e.details()])
'''
CLASSIFY, REGRESS = "tensorflow/serving/classify", "tensorflow/serving/regress"


def test_multi_inference_runs_its_tasks_on_one_input(models, tmp_path):
    """An Estimator classifier's classify (serving_default) and regress ("regression") signatures on one input."""
    server, paths = models
    _, got = client.run(MULTI, tmp_path, url=server.grpc_address, examples=[e.hex() for e in SERIALIZED[:2]],
                        tasks=[["classifier", "", CLASSIFY], ["classifier", "regression", REGRESS]])
    classified, regressed = got["results"]
    assert classified["model_spec"] == {"name": "classifier", "signature_name": "serving_default", "version": "1"}
    assert regressed["model_spec"] == {"name": "classifier", "signature_name": "regression", "version": "1"}
    scores = estimator.run(paths["classifier"], "serving_default", SERIALIZED[:2])["scores"]
    np.testing.assert_allclose([[c["score"] for c in row["classes"]]
                                for row in classified["classification_result"]["classifications"]], scores, rtol=1e-5)
    want = estimator.run(paths["classifier"], "regression", SERIALIZED[:2])["outputs"].reshape(-1)
    np.testing.assert_allclose([r["value"] for r in regressed["regression_result"]["regressions"]], want, rtol=1e-5)


@pytest.mark.parametrize("tasks, code, message", [
    ([["classifier", "", CLASSIFY], ["regressor", "", REGRESS]], "INVALID_ARGUMENT",
     "All ModelSpecs in a MultiInferenceRequest must access the same model name."),
    ([["classifier", "", CLASSIFY], ["classifier", "serving_default", CLASSIFY]], "INVALID_ARGUMENT",
     "Duplicate evaluation of signature: serving_default"),
    ([["classifier", "nope", CLASSIFY]], "INVALID_ARGUMENT", "Requested signature not found in model graph: nope"),
    ([["classifier", "predict", "tensorflow/serving/predict"]], "UNIMPLEMENTED",
     "Unsupported signature method_name: tensorflow/serving/predict"),
    ([["classifier", "", REGRESS]], "INVALID_ARGUMENT",
     "Expected regression signature method_name to be tensorflow/serving/regress. Was: tensorflow/serving/classify"),
])
def test_multi_inference_errors_are_tf_servings(models, tmp_path, tasks, code, message):
    server, _ = models
    _, got = client.run(MULTI, tmp_path, url=server.grpc_address, examples=[SERIALIZED[0].hex()], tasks=tasks)
    assert got[0] == code and got[1].startswith(message), got


FAILURE = '''
r = getattr({"classify": classification_pb2.ClassificationRequest, "regress": regression_pb2.RegressionRequest}[
    args["rpc"]], "__call__")()
r.model_spec.name, r.model_spec.signature_name = args["model"], args["signature"]
for e in args["examples"]:
    r.input.example_list.examples.add().ParseFromString(bytes.fromhex(e))
reply(result=failure({"classify": predict.Classify, "regress": predict.Regress}[args["rpc"]], r))
'''
PARSE_ERRORS = [[example(n=1)], [example(x=[1.0, 2.0], n=1)], [SERIALIZED[0], example(x=[1, 2, 3])],
                [example(x=[1.0, 2.0, 3.0], n=1.5)], [example(x=[b"a", b"b", b"c"])]]


@pytest.mark.parametrize("examples", PARSE_ERRORS, ids=["missing", "length", "kind", "int kind", "bytes"])
def test_examples_that_do_not_parse_get_tensorflows_message(models, tmp_path, examples):
    server, paths = models
    with pytest.raises(tf.errors.InvalidArgumentError) as tensorflow_says:
        estimator.run(paths["classifier"], "serving_default", examples)
    _, got = client.run(FAILURE, tmp_path, url=server.grpc_address, rpc="classify", model="classifier",
                        signature="", examples=[e.hex() for e in examples])
    assert got[0] == "INVALID_ARGUMENT"
    assert got[1] in tensorflow_says.value.message, (got, tensorflow_says.value.message)


@pytest.mark.parametrize("rpc, model, signature, examples, code, message", [
    ("classify", "classifier", "", [], "INVALID_ARGUMENT", "Input is empty."),
    ("classify", "regressor", "", SERIALIZED[:1], "INVALID_ARGUMENT",
     "Expected classification signature method_name to be tensorflow/serving/classify. Was: "
     "tensorflow/serving/regress"),
    ("regress", "classifier", "", SERIALIZED[:1], "INVALID_ARGUMENT",
     "Expected regression signature method_name to be tensorflow/serving/regress. Was: tensorflow/serving/classify"),
    ("classify", "classifier", "nope", SERIALIZED[:1], "INVALID_ARGUMENT", "No signature was found with the name: nope"),
    ("classify", "nope", "", SERIALIZED[:1], "NOT_FOUND", "Servable not found for request: Latest(nope)"),
    ("classify", "class_ids", "", SERIALIZED[:1], "UNIMPLEMENTED",
     "signature 'serving_default' output 'classes' (DT_STRING) is computed by"),
    ("classify", "sparse", "", SERIALIZED[:1], "UNAVAILABLE", "...'tags'"),
])
def test_classify_and_regress_errors_are_tf_servings(models, tmp_path, rpc, model, signature, examples, code,
                                                      message):
    server, _ = models
    _, got = client.run(FAILURE, tmp_path, url=server.grpc_address, rpc=rpc, model=model, signature=signature,
                        examples=[e.hex() for e in examples])
    assert got[0] == code
    assert message[3:] in got[1] if message.startswith("...") else got[1].startswith(message), got


def _post(server, path: str, body) -> httpx.Response:
    return httpx.post(f"http://{server.http_address}{path}", json=body, timeout=TIMEOUT_S)


def test_rest_classify_and_regress_answer_tf_servings_json(models):
    server, paths = models
    rows = [{"x": [float(v) for v in r["x"]], **({"n": r["n"]} if "n" in r else {})} for r in ROWS]
    got = _post(server, "/v1/models/classifier:classify", {"examples": rows})
    assert got.status_code == 200, got.text
    want = estimator.run(paths["classifier"], "serving_default", SERIALIZED)
    results = got.json()["results"]
    assert [[label for label, _ in r] for r in results] == [[c.decode() for c in row] for row in want["classes"]]
    np.testing.assert_allclose([[s for _, s in r] for r in results], want["scores"], rtol=1e-5, atol=1e-6)
    got = httpx.post(f"http://{server.http_address}/v1/models/regressor/versions/1:regress",
                     content=gzip.compress(httpx.Request("POST", "/", json={
                         "signature_name": "serving_default", "context": {"n": 3}, "examples": rows[:2]}).content),
                     headers={"Content-Encoding": "gzip"}, timeout=TIMEOUT_S)
    assert got.status_code == 200, got.text
    merged = [example(n=3) + example(**{k: v for k, v in r.items()}) for r in ROWS[:2]]
    want = estimator.run(paths["regressor"], "serving_default", merged)["outputs"].reshape(-1)
    np.testing.assert_allclose(got.json()["results"], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("path, body, status, message", [
    ("/v1/models/classifier:classify", {"instances": []}, 400, "Missing 'examples' key"),
    ("/v1/models/classifier:classify", {"examples": []}, 400, "Input is empty."),
    ("/v1/models/classifier:classify", {"examples": [{"n": 1}]}, 400,
     "Name: <unknown>, Feature: x (data type: float) is required but could not be found."),
    ("/v1/models/classifier:regress", {"examples": [{"n": 1}]}, 400, "Expected regression signature method_name"),
    ("/v1/models/class_ids:classify", {"examples": [{"x": [1.0, 2.0, 3.0]}]}, 501, "signature 'serving_default'"),
    ("/v1/models/nope:classify", {"examples": [{"n": 1}]}, 404, "Servable not found for request: Latest(nope)"),
])
def test_rest_errors_are_tf_servings(models, path, body, status, message):
    server, _ = models
    got = _post(server, path, body)
    assert (got.status_code, list(got.json())) == (status, ["error"]), got.text
    assert got.json()["error"].startswith(message), got.text
