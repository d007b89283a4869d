"""A served model's SignatureDefs as TF Serving shows them: a SavedModel's own, every one of them (GetModelMetadata
lists them all, as TF Serving does), or for a GraphDef model one "serving_default" predict signature made of its
config's inputs and outputs. Predict runs the signature the model serves (models/: "serving_default", or the
config's TF_SIGNATURE_DEF)."""
from __future__ import annotations

from xlacs import dtypes
from xlacs.v1 import tf_saved_model_pb2

from xlacs_server.errors import FailedPrecondition, Unimplemented
from xlacs_server.models import datatypes
from xlacs_server.tfserving.tensors import shape_proto

PREDICT_METHOD = "tensorflow/serving/predict"


def signature_defs(model) -> dict[str, tf_saved_model_pb2.SignatureDef]:
    source = model.signature
    return dict(source.signature_defs) or {source.signature_key: _made(model)}


def served(model, key: str) -> str:
    """`key` when it names the signature `model` serves. TF Serving's FAILED_PRECONDITION for a signature the model
    lacks; UNIMPLEMENTED for one of its SavedModel's other signatures, which xlacs did not compile."""
    source = model.signature
    if key == source.signature_key:
        return key
    if key not in source.signature_defs:
        raise FailedPrecondition(f'Serving signature key "{key}" not found.')
    raise Unimplemented(f"{model!r} serves signature {source.signature_key!r} only; its SavedModel's signature "
                        f"{key!r} is not compiled: serve it as a model of its own, whose config.pbtxt names it "
                        f'(parameters {{ key: "TF_SIGNATURE_DEF" value {{ string_value: "{key}" }} }})')


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
