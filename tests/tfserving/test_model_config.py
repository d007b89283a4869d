"""TensorFlow Serving's own layout and config: a models.config (ModelServerConfig) of two models in TF Serving's layout
(BASE/<version>/saved_model.pb) with labels stable and canary, driven by TF Serving's official client (Predict,
GetModelMetadata and GetModelStatus by label, matching TensorFlow) and plain HTTP (/v1/.../labels/<label>);
HandleReloadConfigRequest moving a label, adding and removing models, with the status after it and requests in
flight meanwhile; every error in TF Serving's words; --model-base-path; what start refuses."""
from __future__ import annotations

import re
import shutil
import types

import grpc
import httpx
import numpy as np
import pytest

from tests.model_repository import ModelServer, tf_serving_model, write_config
from tests.saved_model.models import saved, tf_outputs
from tests.tfserving import client
from xlacs.cli import build_parser
from xlacs_server.config import Settings
from xlacs_server.errors import FailedPrecondition, InvalidRequest
from xlacs_server.main import settings_from_args
from xlacs_server.models import server_config
from xlacs_server.models.repository import ModelRepository
from xlacs_server.tfserving import tensors
from xlacs_server.tfserving.apis import model_management_pb2, model_service_pb2_grpc, predict_pb2

TIMEOUT_S = 120
UNAVAILABLE_LABEL = ("Request to assign label to version {v} of model {m}, which is not currently available for "
                     "inference")


def models_config(keras, *others, policy="specific { versions: 1 versions: 2 }", stable=1, canary=2) -> str:
    """A models.config: "keras" (its policy and labels) and the other models (name, base path), latest 1."""
    entries = [f'''config {{
        name: "keras" base_path: "{keras}" model_platform: "tensorflow"
        model_version_policy {{ {policy} }}
        version_labels {{ key: "stable" value: {stable} }}
        version_labels {{ key: "canary" value: {canary} }}
      }}''']
    entries += [f'config {{ name: "{name}" base_path: "{base}" model_platform: "tensorflow" }}'
                for name, base in others]
    return "model_config_list {\n  " + "\n  ".join(entries) + "\n}\n"


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    """The models' base paths: keras (versions 1, 2, 3: Keras exports), affine and lookup (tf.Modules, version 1)
    and broken (a version that is no SavedModel)."""
    root = tmp_path_factory.mktemp("tf-serving-models")
    built = tf_serving_model(root / "keras", versions=(1, 2, 3))
    for name in ("affine", "lookup"):
        shutil.copytree(saved(name), root / name / "1")
    (root / "broken" / "1").mkdir(parents=True)
    (root / "broken" / "1" / "saved_model.pb").write_bytes(b"\xff\xfenot a SavedModel")
    return types.SimpleNamespace(root=root, keras=built, affine=root / "affine", lookup=root / "lookup",
                                 broken=root / "broken")


def _serve(bases, tmp_path):
    config = tmp_path / "models.config"
    config.write_text(models_config(bases.root / "keras", ("affine", bases.affine)))
    return ModelServer(None, model_config_file=str(config), allow_version_labels_for_unavailable_models=True)


@pytest.fixture(scope="module")
def labelled(bases, tmp_path_factory):
    with _serve(bases, tmp_path_factory.mktemp("config")) as server:
        yield server


BY_LABEL = '''
def spec(r, name, label=None, version=None):
    r.model_spec.name = name
    if label is not None:
        r.model_spec.version_label = label
    if version is not None:
        r.model_spec.version.value = version
    return r
def predict_request(name, alias, x, label=None):
    r = spec(predict_pb2.PredictRequest(), name, label)
    r.inputs[alias].CopyFrom(tf.make_tensor_proto(x))
    return r
def metadata_request(name, label=None):
    return spec(get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"]), name, label)
def status_request(name, label=None):
    return spec(get_model_status_pb2.GetModelStatusRequest(), name, label)
out, result = {}, {}
for label in ("stable", "canary"):
    answer = predict.Predict(predict_request("keras", "x", arrays["x"], label), timeout=120)
    out[label] = tf.make_ndarray(answer.outputs["output_0"])
    result[label] = as_dict(answer.model_spec)
    metadata = predict.GetModelMetadata(metadata_request("keras", label), timeout=120)
    result[label + "_metadata"] = as_dict(metadata.model_spec)
    result[label + "_status"] = as_dict(model_service.GetModelStatus(status_request("keras", label), timeout=120))
answer = predict.Predict(predict_request("affine", "x", arrays["x"]), timeout=120)
out["affine_y"] = tf.make_ndarray(answer.outputs["y"])
result["status"] = as_dict(model_service.GetModelStatus(status_request("keras"), timeout=120))
result["unknown"] = [failure(predict.Predict, predict_request("keras", "x", arrays["x"], "nope")),
                     failure(predict.GetModelMetadata, metadata_request("keras", "nope")),
                     failure(model_service.GetModelStatus, status_request("keras", "nope")),
                     failure(predict.Predict, predict_request("affine", "x", arrays["x"], "stable"))]
reply(arrays=out, result=result)
'''


def test_labels_name_versions_in_every_api(labelled, bases, tmp_path):
    x = np.random.default_rng(1).uniform(-2, 2, (3, 4)).astype(np.float32)
    got, said = client.run(BY_LABEL, tmp_path, {"x": x}, url=labelled.grpc_address)
    keras = bases.keras
    np.testing.assert_allclose(got["stable"], keras.expected({"x": x}, 1)["output_0"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["canary"], keras.expected({"x": x}, 2)["output_0"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["affine_y"], tf_outputs(bases.affine / "1", "serving_default", {"x": x})["y"],
                               rtol=1e-5, atol=1e-5)
    assert said["stable"] == {"name": "keras", "version": "1", "signature_name": "serving_default"}
    assert said["canary"]["version"] == "2" and said["canary_metadata"] == {"name": "keras", "version": "2"}
    assert said["stable_status"] == {"model_version_status": [{"version": "1", "state": "AVAILABLE", "status": {}}]}
    assert said["canary_status"] == {"model_version_status": [{"version": "2", "state": "AVAILABLE", "status": {}}]}
    # The policy's versions only (specific 1 and 2: version 3 is on disk, not served).
    assert [s["version"] for s in said["status"]["model_version_status"]] == ["2", "1"]
    assert said["unknown"] == [["INVALID_ARGUMENT", "Unrecognized servable version label: nope"]] * 3 + [
        ["INVALID_ARGUMENT", "Unrecognized servable version label: stable"]]  # affine has no labels


def test_rest_and_the_open_inference_protocol_serve_the_models_config(labelled, bases):
    x = np.random.default_rng(2).uniform(-2, 2, (2, 4)).astype(np.float32)
    base = f"http://{labelled.http_address}"
    got = httpx.post(f"{base}/v1/models/keras/labels/canary:predict", json={"instances": x.tolist()}, timeout=TIMEOUT_S)
    assert got.status_code == 200, got.text
    np.testing.assert_allclose(got.json()["predictions"], bases.keras.expected({"x": x}, 2)["output_0"], rtol=1e-5,
                               atol=1e-5)
    ok = {"error_code": "OK", "error_message": ""}
    assert httpx.get(f"{base}/v1/models/keras/labels/stable", timeout=TIMEOUT_S).json() == {
        "model_version_status": [{"version": "1", "state": "AVAILABLE", "status": ok}]}
    metadata = httpx.get(f"{base}/v1/models/keras/labels/canary/metadata", timeout=TIMEOUT_S).json()
    assert metadata["model_spec"] == {"name": "keras", "signature_name": "", "version": "2"}
    for path in ("/labels/nope", "/labels/nope/metadata"):
        refused = httpx.get(f"{base}/v1/models/keras{path}", timeout=TIMEOUT_S)
        assert (refused.status_code, refused.json()) == (400, {"error": "Unrecognized servable version label: nope"})
    # The Open Inference Protocol serves the same versions, with the config xlacs made of the SavedModel.
    v2 = httpx.post(f"{base}/v2/models/keras/versions/2/infer", json={"inputs": [
        {"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}]}, timeout=TIMEOUT_S)
    np.testing.assert_array_equal(np.array(v2.json()["outputs"][0]["data"], np.float32).reshape(2, 3),
                                  np.array(got.json()["predictions"], np.float32))
    config = httpx.get(f"{base}/v2/models/keras/config", timeout=TIMEOUT_S).json()
    assert (config["name"], config["platform"], config["max_batch_size"]) == ("keras", "tensorflow_savedmodel", 4)
    assert config["version_policy"] == {"specific": {"versions": [1, 2]}}


def test_version_and_label_are_a_oneof_whose_last_wins(labelled):
    """TF Serving's ModelSpec has oneof version_choice: a request that carries both (protobuf merges the two
    messages below) gets the one last on the wire."""
    def spec(**fields) -> bytes:
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "keras"
        for name, value in fields.items():
            if name == "version":
                request.model_spec.version.value = value
            else:
                setattr(request.model_spec, name, value)
        return request.SerializeToString()
    request = predict_pb2.PredictRequest()
    request.inputs["x"].CopyFrom(tensors.from_array(np.zeros((1, 4), np.float32)))
    inputs = request.SerializeToString()
    with grpc.insecure_channel(labelled.grpc_address) as channel:
        call = channel.unary_unary("/tensorflow.serving.PredictionService/Predict")
        for first, last, version in ((dict(version=1), dict(version_label="canary"), 2),
                                     (dict(version_label="canary"), dict(version=1), 1)):
            answer = predict_pb2.PredictResponse.FromString(call(spec(**first) + spec(**last) + inputs,
                                                                 timeout=TIMEOUT_S))
            assert answer.model_spec.version.value == version


RELOAD = '''
import threading
from google.protobuf import text_format
def reload(text, metric_names=()):
    r = model_management_pb2.ReloadConfigRequest(metric_names=list(metric_names))
    text_format.Parse(text, r.config)
    try:
        return as_dict(model_service.HandleReloadConfigRequest(r, timeout=600))
    except grpc.RpcError as e:
        return [e.code().name, e.details()]
def status(name):
    r = get_model_status_pb2.GetModelStatusRequest()
    r.model_spec.name = name
    try:
        return [(s.version, get_model_status_pb2.ModelVersionStatus.State.Name(s.state), s.status.error_code)
                for s in model_service.GetModelStatus(r, timeout=120).model_version_status]
    except grpc.RpcError as e:
        return [e.code().name, e.details()]
def by_label(label):
    r = predict_pb2.PredictRequest()
    r.model_spec.name, r.model_spec.version_label = "keras", label
    r.inputs["x"].CopyFrom(tf.make_tensor_proto(arrays["x"]))
    answer = predict.Predict(r, timeout=120)
    return answer.model_spec.version.value, tf.make_ndarray(answer.outputs["output_0"])
result = {"refused": [reload(text) for text in args["refused"]]}
result["partly"] = reload(args["partly"])
result["after_partly"] = {name: status(name) for name in ("keras", "affine", "lookup", "broken")}
# Requests by label "stable" (version 1, which stays) while the last reload unloads version 2 and moves "canary".
stop, answered, failed = threading.Event(), [], []
def keep_asking():
    while not stop.is_set():
        try:
            answered.append(by_label("stable")[0])
        except grpc.RpcError as e:
            failed.append([e.code().name, e.details()])
asker = threading.Thread(target=keep_asking)
asker.start()
result["final"] = reload(args["final"], metric_names=["/tensorflow/serving/model_load_count"])
stop.set()
asker.join()
result["in_flight"] = {"answered": len(answered), "versions": sorted(set(answered)), "failed": failed[:3]}
result["after_final"] = {name: status(name) for name in ("keras", "lookup", "broken")}
version, y = by_label("canary")
result["canary_version"] = version
reply(arrays={"canary": y}, result=result)
'''

REFUSED = [  # (models.config text, TF Serving's code and message, or the start of xlacs's)
    ("", "INVALID_ARGUMENT", "ServerModelConfig type not supported by HandleReloadConfigRequest. Only ModelConfigList "
                             "is currently supported"),
    ('custom_model_config { type_url: "type.googleapis.com/x.Y" }', "INVALID_ARGUMENT",
     "ServerModelConfig type not supported by HandleReloadConfigRequest."),
    ('model_config_list { config { name: "a" base_path: "/a" model_platform: "tensorflow" } '
     'config { name: "a" base_path: "/b" model_platform: "tensorflow" } }', "INVALID_ARGUMENT",
     "Illegal to list model a multiple times in config list"),
    ('model_config_list { config { name: "a" base_path: "models/a" model_platform: "tensorflow" } }',
     "INVALID_ARGUMENT", "Expected model a to have an absolute path or URI; got base_path()=models/a"),
    ('model_config_list { config { name: "a" base_path: "/a" model_platform: "onnx" } }', "INVALID_ARGUMENT",
     "Model a requests unsupported platform onnx"),
    ('model_config_list { config { name: "a" base_path: "/a" } }', "INVALID_ARGUMENT",
     "Illegal setting neither ModelServerConfig::model_type (deprecated) nor ModelServerConfig::model_platform, model "
     "name is a"),
    ('model_config_list { config { name: "a" base_path: "/a" model_type: TENSORFLOW } }', "INVALID_ARGUMENT",
     "the reload's config: field model_config_list.config[0].model_type is not honoured by xlacs"),
    ('model_config_list { config { name: "a" base_path: "/a" model_platform: "tensorflow" '
     'logging_config { sampling_config { sampling_rate: 0.5 } } } }', "INVALID_ARGUMENT",
     "the reload's config: field model_config_list.config[0].logging_config is not honoured by xlacs"),
]


def test_reload_moves_a_label_adds_and_removes_models(bases, tmp_path):
    keras = bases.root / "keras"
    # Canary to version 3, which is not loaded: refused as TF Serving refuses it (even with
    # allow_version_labels_for_unavailable_models: "canary" names another version already), and nothing changes.
    refused = [text for text, _, _ in REFUSED] + [models_config(keras, ("affine", bases.affine), canary=3)]
    # Version 3 loaded, affine out, lookup and broken in: broken fails, the rest of the config stands.
    partly = models_config(keras, ("lookup", bases.lookup), ("broken", bases.broken),
                           policy="specific { versions: [1, 2, 3] }")
    # Canary to version 3, now AVAILABLE; version 2 out; broken out.
    final = models_config(keras, ("lookup", bases.lookup), policy="specific { versions: [1, 3] }", canary=3)
    x = np.random.default_rng(3).uniform(-2, 2, (2, 4)).astype(np.float32)
    with _serve(bases, tmp_path) as server:
        stable = server.models.model("keras", "1")
        got, said = client.run(RELOAD, tmp_path / "client", {"x": x}, url=server.grpc_address, refused=refused,
                               partly=partly, final=final)
        assert server.models.model("keras", "1") is stable  # version 1 stayed loaded through every reload

    for answer, (_, code, message) in zip(said["refused"], REFUSED):
        assert answer[0] == code and answer[1].startswith(message), answer
    assert said["refused"][-1][0] == "FAILED_PRECONDITION"
    assert said["refused"][-1][1].startswith(UNAVAILABLE_LABEL.format(v=3, m="keras"))

    assert said["partly"][0] == "UNKNOWN"
    assert said["partly"][1].startswith("1 model(s) did not become available: {{{name: broken version: 1} due to "
                                        "error: INVALID_ARGUMENT: model 'broken': "), said["partly"]
    assert said["partly"][1].endswith("is not a SavedModel protobuf}, }")
    assert said["after_partly"] == {
        "keras": [[3, "AVAILABLE", 0], [2, "AVAILABLE", 0], [1, "AVAILABLE", 0]],
        "affine": ["NOT_FOUND", "Could not find any versions of model affine"],
        "lookup": [[1, "AVAILABLE", 0]],
        "broken": [[1, "END", grpc.StatusCode.INVALID_ARGUMENT.value[0]]]}

    assert said["final"] == {"status": {}, "metric": [{"name": "/tensorflow/serving/model_load_count",
                                                       "int64_value_increase": "0"}]}
    assert said["in_flight"]["failed"] == [] and said["in_flight"]["versions"] == [1], said["in_flight"]
    assert said["in_flight"]["answered"] > 0
    assert said["after_final"] == {"keras": [[3, "AVAILABLE", 0], [1, "AVAILABLE", 0]], "lookup": [[1, "AVAILABLE", 0]],
                                   "broken": ["NOT_FOUND", "Could not find any versions of model broken"]}
    assert said["canary_version"] == 3
    np.testing.assert_allclose(got["canary"], bases.keras.expected({"x": x}, 3)["output_0"], rtol=1e-5, atol=1e-5)


def test_one_model_base_path_with_a_config_pbtxt(bases, tmp_path):
    """--model-base-path serves one model, "default" unless --model-name; BASE/config.pbtxt (optional, Triton's)
    sets what a TF Serving model has no place for in models.config, here max_batch_size."""
    base = tmp_path / "one"
    shutil.copytree(bases.root / "keras" / "2", base / "2")
    write_config(base, "max_batch_size: 8\ndynamic_batching {}\n")
    x = np.random.default_rng(4).uniform(-2, 2, (6, 4)).astype(np.float32)
    with ModelServer(None, model_base_path=str(base)) as server:
        got = httpx.post(f"http://{server.http_address}/v1/models/default:predict", json={"instances": x.tolist()},
                         timeout=TIMEOUT_S)
        assert got.status_code == 200, got.text  # 6 rows: more than the default 4
        np.testing.assert_allclose(got.json()["predictions"], bases.keras.expected({"x": x}, 2)["output_0"],
                                   rtol=1e-5, atol=1e-5)
        # HandleReloadConfigRequest takes a config on such a daemon too, as TF Serving's does: here, a name of its own.
        request = model_management_pb2.ReloadConfigRequest()
        request.config.model_config_list.config.add(name="renamed", base_path=str(base), model_platform="tensorflow")
        with grpc.insecure_channel(server.grpc_address) as channel:
            answer = model_service_pb2_grpc.ModelServiceStub(channel).HandleReloadConfigRequest(request,
                                                                                                timeout=TIMEOUT_S)
        assert answer.HasField("status") and answer.status.error_code == 0
        assert [(s.name, s.version, s.state) for s in server.models.index()] == [("renamed", "2", "READY")]


# --- What start refuses (the repository alone: no daemon) ------------------------------------------------------------

def _repository(**settings) -> ModelRepository:
    return ModelRepository(types.SimpleNamespace(settings=Settings(cache_dir="", **settings)), None)


def test_start_refuses_labels_of_versions_not_loaded_as_tf_serving_does(bases, tmp_path):
    config = tmp_path / "models.config"
    config.write_text(models_config(bases.root / "keras"))
    with pytest.raises(FailedPrecondition) as error:
        _repository(model_config_file=str(config))
    assert str(error.value).startswith(UNAVAILABLE_LABEL.format(v=2, m="keras"))  # "canary": labels in order
    assert _repository(model_config_file=str(config), allow_version_labels_for_unavailable_models=True).labels(
        "keras") == {"stable": 1, "canary": 2}


def test_a_models_config_that_does_not_parse_names_its_file_and_line(tmp_path):
    config = tmp_path / "models.config"
    config.write_text('model_config_list {\n  config {\n    name: "a"\n    base_paths: "/a"\n  }\n}\n')
    with pytest.raises(InvalidRequest, match=f"^{re.escape(str(config))} line 4, column 5: .*base_paths"):
        _repository(model_config_file=str(config))
    with pytest.raises(InvalidRequest, match="cannot read the model config file"):
        _repository(model_config_file=str(tmp_path / "missing.config"))


@pytest.mark.parametrize("settings, message", [
    (dict(model_repository="/m", model_base_path="/b"), "--model-repository and --model-config-file / "
                                                         "--model-base-path are exclusive"),
    (dict(model_config_file="/c", model_base_path="/b"), "--model-config-file and --model-base-path / --model-name "
                                                          "are exclusive"),
    (dict(model_name="m"), "--model-name names the model of --model-base-path"),
])
def test_start_refuses_settings_that_name_models_twice(settings, message):
    with pytest.raises(ValueError, match=message):
        _repository(**settings)


def test_a_relative_or_remote_base_path_is_refused():
    with pytest.raises(InvalidRequest, match=r"^Expected model default to have an absolute path or URI; got "
                                             r"base_path\(\)=models/m$"):
        _repository(model_base_path="models/m")
    with pytest.raises(InvalidRequest, match="base_path gs://bucket/m is a URI; xlacs reads base paths on the "):
        server_config.declared(server_config.single("m", "gs://bucket/m"), "x")


def test_serve_flags_are_tf_servings(capsys):
    args = build_parser().parse_args(["serve", "--model-base-path", "/models/m", "--model-name", "m",
                                      "--allow-version-labels-for-unavailable-models"])
    settings = settings_from_args(args)
    assert (settings.model_base_path, settings.model_name) == ("/models/m", "m")
    assert settings.allow_version_labels_for_unavailable_models
    args = build_parser().parse_args(["serve", "--model-config-file", "/models.config"])
    settings = settings_from_args(args)
    assert settings.model_config_file == "/models.config" and not settings.allow_version_labels_for_unavailable_models
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    shown = capsys.readouterr().out
    assert all(flag in shown for flag in (
        "--model-config-file PATH", "--model-base-path BASE", "--model-name NAME",
        "--allow-version-labels-for-unavailable-models"))
