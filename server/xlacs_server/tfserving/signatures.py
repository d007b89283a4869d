"""A served model's SignatureDefs as TF Serving shows them: a SavedModel's own, every one of them (GetModelMetadata
lists them all, as TF Serving does), or for a GraphDef model one "serving_default" predict signature made of its
config's inputs and outputs. Predict runs any of them (models/ compiles a SavedModel's every signature at load, but
TensorFlow's own) as TF Serving does, whatever its method_name (TF Serving checks it only with
--enable_signature_method_name_check, off by default)."""
from __future__ import annotations

import grpc
from xlacs import dtypes
from xlacs.v1 import tf_saved_model_pb2

from xlacs_server.errors import FailedPrecondition, Unimplemented, XlacsError
from xlacs_server.models import datatypes
from xlacs_server.models.source import TENSORFLOWS_OWN
from xlacs_server.tfserving.tensors import shape_proto

PREDICT_METHOD = "tensorflow/serving/predict"


def signature_defs(model) -> dict[str, tf_saved_model_pb2.SignatureDef]:
    source = model.signature
    return dict(source.signature_defs) or {source.signature_key: _made(model)}


def served(model, key: str):
    """The signature `key` as `model` serves it (models/served_signature.py: its inputs, outputs and run). TF Serving's
    FAILED_PRECONDITION for a signature the model lacks; for one of its SavedModel's that xlacs does not serve, why."""
    source = model.signature
    found = model.signatures.get(key)
    if found is not None:
        return found
    cause = model.refused.get(key)
    if cause is not None:
        ours = not isinstance(cause, XlacsError) or cause.code == grpc.StatusCode.INTERNAL  # a bug of xlacs
        raise (XlacsError if ours else Unimplemented)(f"{model!r}: signature {key!r} is not served: {cause}")
    if key in source.signature_defs and key.startswith(TENSORFLOWS_OWN):
        raise FailedPrecondition(f'Serving signature key "{key}" is TensorFlow\'s own (the SavedModel\'s '
                                 "initialization), not a function to run")
    raise FailedPrecondition(f'Serving signature key "{key}" not found.')


def _made(model) -> tf_saved_model_pb2.SignatureDef:
    """A GraphDef model's one signature: its config's inputs and outputs, keyed by their names."""
    tensors = {b.name: b.tensor for b in model.signature.inputs + model.signature.outputs}

    def info(meta) -> tf_saved_model_pb2.TensorInfo:
        return tf_saved_model_pb2.TensorInfo(name=tensors[meta.name],
                                             dtype=dtypes.from_numpy(datatypes.to_numpy(meta.datatype, meta.name)),
                                             tensor_shape=shape_proto(meta.shape))
    return tf_saved_model_pb2.SignatureDef(inputs={m.name: info(m) for m in model.inputs},
                                           outputs={m.name: info(m) for m in model.outputs},
                                           method_name=PREDICT_METHOD)
