"""TF Serving's Classify, Regress and MultiInference over a served model whose signature takes serialized tf.Examples
(models/examples.py): the examples are parsed on the host (tfserving/examples.py), the dense features run through
ServedModel.infer (batcher, statistics, execute slots, as Predict), and the outputs become TF Serving's results. Checks
and messages follow TF Serving's (tensorflow_serving/servables/tensorflow/classifier.cc, regressor.cc,
multi_inference.cc, util.cc); docs/tf_serving.md maps them."""
from __future__ import annotations

import numpy as np
from google.protobuf import text_format
from xlacs.saved_model import DEFAULT_SIGNATURE

from xlacs_server.errors import FailedPrecondition, InvalidRequest, Unimplemented
from xlacs_server.tfserving import examples, signatures
from xlacs_server.tfserving.apis import classification_pb2, regression_pb2

CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
INPUTS, CLASSES, SCORES, OUTPUTS = "inputs", "classes", "scores", "outputs"


def signature(model, name: str, method: str) -> str:
    """The key of the signature `name` (empty: serving_default) when its method is `method` and its outputs are TF
    Serving's for it; the served one (signatures.served), taking serialized tf.Examples."""
    key = name or DEFAULT_SIGNATURE
    defs = signatures.signature_defs(model)
    if key not in defs:
        raise InvalidRequest(f"No signature was found with the name: {key}")
    check(defs[key], method)
    if signatures.served(model, key).source.examples is None:
        raise Unimplemented(f"{model!r}: signature {key!r} does not take serialized tf.Examples read by a "
                            "ParseExample node, which is what xlacs runs Classify and Regress on")
    return key


def check(signature_def, method: str) -> None:
    """TF Serving's PreProcessClassification and PreProcessRegression."""
    what = "classification" if method == CLASSIFY_METHOD else "regression"
    if signature_def.method_name != method:
        raise InvalidRequest(f"Expected {what} signature method_name to be {method}. Was: "
                             f"{signature_def.method_name}")
    if len(signature_def.inputs) != 1:
        raise InvalidRequest("Expected one input Tensor.")
    outputs = signature_def.outputs
    if method == CLASSIFY_METHOD and len(outputs) not in (1, 2):
        raise InvalidRequest(f"Expected one or two output Tensors, found {len(outputs)}")
    if method == REGRESS_METHOD and len(outputs) != 1:
        raise InvalidRequest("Expected one output Tensor.")
    shown = text_format.MessageToString(signature_def)
    if INPUTS not in signature_def.inputs:
        raise FailedPrecondition(f"No {what} inputs found in SignatureDef: {shown}")
    if method == REGRESS_METHOD and OUTPUTS not in outputs:
        raise FailedPrecondition(f"No regression outputs found in SignatureDef: {shown}")
    if method == CLASSIFY_METHOD and CLASSES not in outputs and SCORES not in outputs:
        raise FailedPrecondition(f'Expected classification signature outputs to contain at least one of "{CLASSES}" '
                                 f'or "{SCORES}". Signature was: {shown}')


def run(model, key: str, given, wanted: list[str], context, max_input_bytes: int) -> dict[str, np.ndarray]:
    """The outputs `wanted` (aliases) of the model's signature `key` on the Input `given`: the numeric ones run in
    chunks of at most the signature's max_batch_size examples, the string ones from their label rows."""
    served = signatures.served(model, key)
    spec = served.source.examples
    for alias in wanted:
        if alias in spec.refused:
            raise Unimplemented(spec.refused[alias])
    serialized = examples.serialized(given)
    features = examples.parse(serialized, spec, max_input_bytes)
    step = served.max_batch_size or len(serialized)
    numeric = [a for a in wanted if a not in spec.labels]
    chunks = [model.infer({k: v[start:start + step] for k, v in features.items()}, numeric, context, key)
              for start in range(0, len(serialized), step)]
    outputs = {a: np.concatenate([c[a] for c in chunks]) for a in numeric}
    outputs.update({a: np.tile(spec.labels[a], (len(serialized), 1)) for a in wanted if a in spec.labels})
    return outputs


def classify(model, key: str, given, context, max_input_bytes: int) -> classification_pb2.ClassificationResult:
    """TF Serving's PostProcessClassificationResult over the outputs of a run."""
    wanted = [a for a in (CLASSES, SCORES) if a in signatures.signature_defs(model)[key].outputs]
    outputs = run(model, key, given, wanted, context, max_input_bytes)
    count = len(next(iter(outputs.values())))
    classes, scores = outputs.get(CLASSES), outputs.get(SCORES)
    for tensor in (classes, scores):
        if tensor is not None and tensor.ndim != 2:
            raise InvalidRequest(f"Expected Tensor shape: [batch_size num_classes] but got {list(tensor.shape)}")
    if scores is not None and scores.dtype != np.float32:
        raise InvalidRequest(f"Expected scores Tensor of DT_FLOAT. Got: {scores.dtype}")
    if classes is not None and scores is not None and classes.shape[1] != scores.shape[1]:
        raise InvalidRequest(f"Tensors class and score should match in dim_size(1). Got {classes.shape[1]} vs. "
                             f"{scores.shape[1]}")
    result = classification_pb2.ClassificationResult()
    for i in range(count):
        row = result.classifications.add()
        for c in range((classes if classes is not None else scores).shape[1]):
            entry = row.classes.add()
            if classes is not None:
                entry.label = classes[i, c].decode("utf-8", "replace")
            if scores is not None:
                entry.score = scores[i, c]
    return result


def regress(model, key: str, given, context, max_input_bytes: int) -> regression_pb2.RegressionResult:
    """TF Serving's PostProcessRegressionResult over the output of a run."""
    values = run(model, key, given, [OUTPUTS], context, max_input_bytes)[OUTPUTS]
    if not (values.ndim == 1 or (values.ndim == 2 and values.shape[1] == 1)):
        raise InvalidRequest(f"Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got "
                             f"{list(values.shape)}")
    if values.dtype != np.float32:
        raise InvalidRequest(f"Expected output Tensor of DT_FLOAT.  Got: {values.dtype}")
    result = regression_pb2.RegressionResult()
    result.regressions.extend(regression_pb2.Regression(value=v) for v in values.reshape(-1))
    return result
