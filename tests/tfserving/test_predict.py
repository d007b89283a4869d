"""TensorFlow Serving's Predict driven by its official client (tensorflow-serving-api) against a real daemon serving a
repository: outputs compared with TensorFlow's, tensors sent as tensor_content and as typed fields, output_filter,
versions, and errors with TF Serving's codes and messages."""
from __future__ import annotations

import numpy as np

from tests.saved_model.models import tf_outputs
from tests.tfserving import client

PREDICT = '''
def tensor(case, alias):
    array = arrays[case["inputs"][alias]]
    field = case.get("field")
    if not field:
        return tf.make_tensor_proto(array)  # numpy in: tensor_content
    proto = tf.make_tensor_proto([], dtype=tf.as_dtype(array.dtype), shape=array.shape)
    values = case.get("values", array.ravel().tolist())
    getattr(proto, field).extend(values)
    return proto
def request(case):
    r = predict_pb2.PredictRequest()
    r.model_spec.name = case["model"]
    if "version" in case:
        r.model_spec.version.value = case["version"]
    if "label" in case:
        r.model_spec.version_label = case["label"]
    if "signature" in case:
        r.model_spec.signature_name = case["signature"]
    for alias in case["inputs"]:
        r.inputs[alias].CopyFrom(tensor(case, alias))
    r.output_filter.extend(case.get("output_filter", []))
    return r
outputs, answers = {}, []
pending = [predict.Predict.future(request(case), timeout=120) for case in args["cases"]]  # at once: batched
for i, future in enumerate(pending):
    answer = future.result()
    for alias, proto in answer.outputs.items():
        outputs[f"{i}/{alias}"] = tf.make_ndarray(proto)
    answers.append({"model_spec": as_dict(answer.model_spec), "outputs": sorted(answer.outputs),
                    "fields": sorted({f.name for p in answer.outputs.values() for f, _ in p.ListFields()})})
reply(arrays=outputs, result=answers)
'''

FAILURES = PREDICT.split("outputs, answers")[0] + '''
reply(result=[failure(predict.Predict, request(case)) for case in args["cases"]])
'''


def _inputs(batch: int, seed: int, features: int = 4) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, (batch, features)).astype(np.float32)


def test_predict_matches_tensorflow(tfs_server, tfs_repository, tmp_path):
    repo = tfs_repository
    arrays = {"b1": _inputs(1, 1), "b3": _inputs(3, 2), "b4": _inputs(4, 3), "b6": _inputs(6, 4),
              "ids": np.random.default_rng(5).integers(0, 10, (2, 3)).astype(np.int32)}
    cases = [
        {"model": "keras_sm", "inputs": {"x": "b1"}},  # batch 1, tensor_content, the latest version
        {"model": "keras_sm", "inputs": {"x": "b3"}, "version": 1},  # a dynamic batch of 3, version 1
        {"model": "keras_sm", "inputs": {"x": "b4"}, "field": "float_val", "signature": "serving_default"},
        {"model": "keras_gd", "inputs": {"x": "b6"}, "field": "float_val"},  # a GraphDef model
        {"model": "affine", "inputs": {"x": "b3"}, "output_filter": ["total"]},
        {"model": "affine", "inputs": {"x": "b1"}},
        {"model": "lookup", "inputs": {"ids": "ids"}, "field": "int_val"},
    ]
    outputs, answers = client.run(PREDICT, tmp_path, arrays, url=tfs_server.grpc_address, cases=cases)

    expected = [
        repo.saved.expected({"x": arrays["b1"]}, 2), repo.saved.expected({"x": arrays["b3"]}, 1),
        repo.saved.expected({"x": arrays["b4"]}, 2), repo.graphdef.expected({"x": arrays["b6"]}),
        {"total": tf_outputs(repo.affine, "serving_default", {"x": arrays["b3"]})["total"]},
        tf_outputs(repo.affine, "serving_default", {"x": arrays["b1"]}),
        tf_outputs(repo.lookup, "serving_default", {"ids": arrays["ids"]}),
    ]
    for i, (case, want) in enumerate(zip(cases, expected)):
        assert answers[i]["outputs"] == sorted(want), case
        for alias, value in want.items():
            np.testing.assert_allclose(outputs[f"{i}/{alias}"], value, rtol=1e-5, atol=1e-5, err_msg=str(case))
            assert outputs[f"{i}/{alias}"].dtype == value.dtype
        # TF Serving's model_spec: the name, the version that ran (int64 as a JSON string) and the signature.
        version = case.get("version", 2 if case["model"] == "keras_sm" else 1)
        assert answers[i]["model_spec"] == {"name": case["model"], "signature_name": "serving_default",
                                            "version": str(version)}
        # Every output here is float32: written in float_val, as TF Serving writes outputs (not tensor_content).
        assert answers[i]["fields"] == ["dtype", "float_val", "tensor_shape"]


def test_typed_fields_read_as_tensorflow_reads_them(tfs_server, tfs_repository, tmp_path):
    """A typed field with fewer values than the shape holds repeats its last one (Tensor::FromProto)."""
    arrays = {"b2": np.zeros((2, 4), np.float32)}
    cases = [{"model": "keras_sm", "inputs": {"x": "b2"}, "field": "float_val", "values": [0.5]},
             {"model": "keras_sm", "inputs": {"x": "b2"}, "field": "float_val", "values": [0.25, -1.0]}]
    outputs, _ = client.run(PREDICT, tmp_path, arrays, url=tfs_server.grpc_address, cases=cases)
    filled = [np.full((2, 4), 0.5, np.float32), np.array([[0.25, -1, -1, -1], [-1, -1, -1, -1]], np.float32)]
    for i, x in enumerate(filled):
        np.testing.assert_allclose(outputs[f"{i}/output_0"], tfs_repository.saved.expected({"x": x})["output_0"],
                                   rtol=1e-5, atol=1e-5)


def test_predict_errors_are_tf_servings(tfs_server, tmp_path):
    arrays = {"x": _inputs(2, 0), "x64": _inputs(2, 0).astype(np.float64), "wide": _inputs(5, 0)}
    cases = [
        {"model": "nope", "inputs": {"x": "x"}},
        {"model": "keras_sm", "version": 7, "inputs": {"x": "x"}},
        {"model": "keras_sm", "label": "stable", "inputs": {"x": "x"}},
        {"model": "keras_sm", "signature": "nope", "inputs": {"x": "x"}},
        {"model": "lookup", "signature": "bump", "inputs": {"x": "x"}},
        {"model": "keras_sm", "inputs": {"y": "x"}},
        {"model": "keras_sm", "inputs": {"x": "x", "y": "x"}},
        {"model": "keras_sm", "inputs": {"x": "x64"}},
        {"model": "keras_sm", "inputs": {"x": "x"}, "output_filter": ["nope"]},
        {"model": "keras_sm", "inputs": {"x": "x"}, "output_filter": ["output_0", "output_0"]},
        {"model": "keras_sm", "inputs": {"x": "x"}, "field": "float_val", "values": [0.0] * 9},
        {"model": "keras_sm", "inputs": {"x": "wide"}},
        {"model": "broken", "inputs": {"x": "x"}},
    ]
    _, failures = client.run(FAILURES, tmp_path, arrays, url=tfs_server.grpc_address, cases=cases)
    codes = [f and f[0] for f in failures]
    assert codes == ["NOT_FOUND", "NOT_FOUND", "INVALID_ARGUMENT", "FAILED_PRECONDITION", "UNIMPLEMENTED",
                     "INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT",
                     "INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT", "UNAVAILABLE"], failures
    messages = [f[1] for f in failures]
    assert messages[0].startswith("Servable not found for request: Latest(nope)")
    assert messages[1].startswith("Servable not found for request: Specific(keras_sm, 7)")
    assert messages[2].startswith("Unrecognized servable version label: stable")
    assert messages[3].startswith('Serving signature key "nope" not found.')
    assert messages[4].startswith("model 'lookup' version 1: signature 'bump' is not served: ")
    assert "AssignAddVariableOp" in messages[4]  # why: it assigns a variable, which xlacs freezes
    assert messages[5].startswith("input tensor alias not found in signature: y. Inputs expected to be in the set {x}.")
    assert messages[6].startswith("input size does not match signature: 2!=1 len({x,y}) != len({x}). Sent extra: {y}. "
                                  "Missing but required: {}.")
    assert messages[7].startswith("input 'x': Expects arg to be float but double is provided")
    assert messages[8].startswith("output tensor alias not found in signature: nope Outputs expected to be in the set "
                                  "{output_0}.")
    assert messages[9].startswith("duplicate output tensor alias: output_0")
    assert messages[10].startswith("tensor parsing error: x")
    assert "max_batch_size 4" in messages[11]
    assert "broken" in messages[12]


RELOAD = '''
reply(result=failure(model_service.HandleReloadConfigRequest, model_management_pb2.ReloadConfigRequest()))
'''


def test_reload_on_a_triton_repository_says_how_to_serve_a_model_server_config(tfs_server, tfs_repository, tmp_path):
    """A model server config reloads TF Serving's models: a daemon serving a Triton repository says how to serve them."""
    _, got = client.run(RELOAD, tmp_path, url=tfs_server.grpc_address)
    assert got[0] == "FAILED_PRECONDITION"
    assert "xlacs serve --model-config-file PATH" in got[1]
    assert f"it serves the model repository {tfs_repository.path}" in got[1]
