"""Runs client scripts with TensorFlow Serving's official Python API (tensorflow-serving-api's stubs, with TensorFlow
for make_tensor_proto and make_ndarray), in the venv scripts/bootstrap makes for it (.venv-tfserving: the stubs need
the `tensorflow` package, whose distribution must not sit beside tensorflow-cpu in .venv). A script gets `arrays`
and `args` and replies as tests/inference/tritonclient.py's do; CLIENT gives it the two stubs and `failure`."""
from __future__ import annotations

import pathlib

from tests.inference import tritonclient

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv-tfserving" / "bin" / "python"

CLIENT = '''
import grpc
import tensorflow as tf
from google.protobuf import json_format
from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2, model_management_pb2,
                                     model_service_pb2_grpc, predict_pb2, prediction_service_pb2_grpc,
                                     classification_pb2, regression_pb2, inference_pb2)
channel = grpc.insecure_channel(args["url"])
predict = prediction_service_pb2_grpc.PredictionServiceStub(channel)
model_service = model_service_pb2_grpc.ModelServiceStub(channel)
def failure(call, *a, **k):
    try:
        call(*a, timeout=120, **k)
        return None
    except grpc.RpcError as e:
        return [e.code().name, e.details()]
def as_dict(message):
    return json_format.MessageToDict(message, preserving_proto_field_name=True)
'''


def run(script: str, work_dir: pathlib.Path, arrays=None, **args):
    """(arrays, result) the script (after CLIENT) replied with."""
    return tritonclient.run(CLIENT + script, work_dir, arrays, python=PYTHON, **args)
