"""GetModelMetadata and GetModelStatus read by TensorFlow Serving's official client, and one model answered by TF
Serving's Predict and by the Open Inference Protocol (tritonclient) in one daemon."""
from __future__ import annotations

import numpy as np
from google.protobuf import json_format
from tensorflow.core.protobuf import saved_model_pb2

from tests.inference import tritonclient
from tests.tfserving import client

METADATA = '''
def metadata(name, version=None, fields=("signature_def",)):
    r = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=list(fields))
    r.model_spec.name = name
    if version is not None:
        r.model_spec.version.value = version
    answer = predict.GetModelMetadata(r, timeout=120)
    signatures = get_model_metadata_pb2.SignatureDefMap()
    assert answer.metadata["signature_def"].Unpack(signatures), answer.metadata["signature_def"].type_url
    return {"model_spec": as_dict(answer.model_spec), "type_url": answer.metadata["signature_def"].type_url,
            "signature_def": {k: as_dict(v) for k, v in signatures.signature_def.items()}}
def status(name, version=None):
    r = get_model_status_pb2.GetModelStatusRequest()
    r.model_spec.name = name
    if version is not None:
        r.model_spec.version.value = version
    return as_dict(model_service.GetModelStatus(r, timeout=120))
def missing_field():
    r = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["nope"])
    r.model_spec.name = "keras_sm"
    return failure(predict.GetModelMetadata, r)
def status_failure(name, version=None):
    r = get_model_status_pb2.GetModelStatusRequest()
    r.model_spec.name = name
    if version is not None:
        r.model_spec.version.value = version
    return failure(model_service.GetModelStatus, r)
reply(result={
    "keras_sm": metadata("keras_sm"), "keras_sm_1": metadata("keras_sm", 1), "keras_gd": metadata("keras_gd"),
    "affine": metadata("affine"),
    "status": status("keras_sm"), "status_1": status("keras_sm", 1), "status_broken": status("broken"),
    "bad_field": missing_field(), "status_unknown": status_failure("nope"), "status_v9": status_failure("keras_sm", 9),
})
'''


def _tf_signatures(path) -> dict:
    """The SavedModel's SignatureDefs as TensorFlow's own protos read them, as JSON."""
    model = saved_model_pb2.SavedModel.FromString((path / "saved_model.pb").read_bytes())
    return {k: json_format.MessageToDict(v, preserving_proto_field_name=True)
            for k, v in model.meta_graphs[0].signature_def.items()}


def test_metadata_and_status(tfs_server, tfs_repository, tmp_path):
    repo = tfs_repository
    _, got = client.run(METADATA, tmp_path, url=tfs_server.grpc_address)

    keras_sm = got["keras_sm"]
    assert keras_sm["type_url"] == "type.googleapis.com/tensorflow.serving.SignatureDefMap"
    assert keras_sm["model_spec"] == {"name": "keras_sm", "version": "2"}
    # Every signature of the SavedModel, exactly as TensorFlow wrote it (as TF Serving lists them).
    assert keras_sm["signature_def"] == _tf_signatures(repo.path / "keras_sm" / "2" / "model.savedmodel")
    assert got["keras_sm_1"]["model_spec"] == {"name": "keras_sm", "version": "1"}
    assert got["affine"]["signature_def"] == _tf_signatures(repo.affine)
    assert {"serving_default", "shift"} <= set(got["affine"]["signature_def"])

    graphdef = got["keras_gd"]["signature_def"]  # made from the config: the graph's tensors, -1 for the batch
    assert graphdef == {"serving_default": {
        "inputs": {"x": {"name": "x:0", "dtype": "DT_FLOAT", "tensor_shape": {"dim": [{"size": "-1"}, {"size": "4"}]}}},
        "outputs": {"Identity": {"name": "Identity:0", "dtype": "DT_FLOAT",
                                 "tensor_shape": {"dim": [{"size": "-1"}, {"size": "3"}]}}},
        "method_name": "tensorflow/serving/predict"}}

    # Highest version first, AVAILABLE with an OK status (TF Serving's JSON leaves the defaults out).
    assert got["status"] == {"model_version_status": [{"version": "2", "state": "AVAILABLE", "status": {}},
                                                      {"version": "1", "state": "AVAILABLE", "status": {}}]}
    assert got["status_1"] == {"model_version_status": [{"version": "1", "state": "AVAILABLE", "status": {}}]}
    broken = got["status_broken"]["model_version_status"]
    assert [(s["version"], s["state"], s["status"]["error_code"]) for s in broken] == [("1", "END", "INVALID_ARGUMENT")]
    assert "GraphDef" in broken[0]["status"]["error_message"]

    assert got["bad_field"] == ["INVALID_ARGUMENT", "Metadata field nope is not supported"]
    assert got["status_unknown"][0] == "NOT_FOUND"
    assert got["status_unknown"][1].startswith("Could not find any versions of model nope")
    assert got["status_v9"] == ["NOT_FOUND", "Could not find version 9 of model keras_sm"]


BOTH_PREDICT = '''
r = predict_pb2.PredictRequest()
r.model_spec.name = "keras_sm"
r.inputs["x"].CopyFrom(tf.make_tensor_proto(arrays["x"]))
reply(arrays={"y": tf.make_ndarray(predict.Predict(r, timeout=120).outputs["output_0"])})
'''

BOTH_TRITON = '''
import tritonclient.grpc as grpcclient
client = grpcclient.InferenceServerClient(args["url"])
given = grpcclient.InferInput("x", list(arrays["x"].shape), "FP32")
given.set_data_from_numpy(arrays["x"])
result = client.infer("keras_sm", [given])
stats = client.get_inference_statistics("keras_sm", "2", as_json=True)["model_stats"][0]
reply(arrays={"y": result.as_numpy("output_0")}, result=int(stats.get("inference_count", 0)))
'''


def test_one_model_answers_predict_and_the_open_inference_protocol(tfs_server, tfs_repository, tmp_path):
    x = np.random.default_rng(9).uniform(-1, 1, (2, 4)).astype(np.float32)
    before = tfs_server.models.model("keras_sm", "2").statistics.snapshot()
    by_predict, _ = client.run(BOTH_PREDICT, tmp_path / "predict", {"x": x}, url=tfs_server.grpc_address)
    by_triton, count = tritonclient.run(BOTH_TRITON, tmp_path / "triton", {"x": x}, url=tfs_server.grpc_address)
    expected = tfs_repository.saved.expected({"x": x}, 2)["output_0"]
    np.testing.assert_allclose(by_predict["y"], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(by_predict["y"], by_triton["y"])
    # Both requests counted in the model's one set of statistics (rows answered: 2 each).
    assert count - int(before.get("inference_count", 0)) == 4
