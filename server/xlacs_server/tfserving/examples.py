"""TF Serving's Input (serialized tf.Examples, with or without a context) parsed on the host into the dense features a
served model's ParseExample was cut into (models/examples.py), with TensorFlow's checks and messages
(tensorflow/core/util/example_proto_fast_parsing.cc): a missing feature takes its default or is required, a feature of
another kind or length is refused naming its key and the example's index."""
from __future__ import annotations

import numpy as np
from google.protobuf.message import DecodeError
from xlacs.v1 import tf_example_pb2

from xlacs_server.errors import InvalidRequest, LimitExceeded
from xlacs_server.models.examples import ExampleSignature
from xlacs_server.tfserving import rest_json
from xlacs_server.tfserving.apis import input_pb2

KINDS = {np.dtype(np.float32): ("float_list", "float"), np.dtype(np.int64): ("int64_list", "int64")}
KIND_NAMES = {"float_list": "float", "int64_list": "int64", "bytes_list": "string"}


def serialized(given: input_pb2.Input) -> list[bytes]:
    """The Input's examples, each serialized, a context merged in as TF Serving merges it (its bytes first, so that
    the example's own features win)."""
    kind = given.WhichOneof("kind")
    if kind == "example_list_with_context":
        listed = given.example_list_with_context
        found = [listed.context + example for example in listed.examples]
    else:
        found = list(given.example_list.examples) if kind else []
    if not found:
        raise InvalidRequest("Input is empty.")
    return found


def parse(examples: list[bytes], spec: ExampleSignature, max_input_bytes: int) -> dict[str, np.ndarray]:
    """The dense features of `examples` by key, as ParseExample gives them: [examples, *shape] each."""
    size = sum(f.dtype.itemsize * int(np.prod(f.shape)) for f in spec.features) * len(examples)
    if size > max_input_bytes:
        raise LimitExceeded(f"the request's {len(examples)} examples parse into {size} bytes", "max_input_bytes",
                            max_input_bytes)
    columns = {f.key: np.empty((len(examples), *f.shape), f.dtype) for f in spec.features}
    for index, data in enumerate(examples):
        try:
            features = tf_example_pb2.Example.FromString(data).features.feature
        except DecodeError:
            raise InvalidRequest(f"Could not parse example input, value: '{data[:64]!r}'") from None
        for feature in spec.features:
            columns[feature.key][index] = _values(features, feature, index)
    return columns


def _values(features, feature, index: int) -> np.ndarray:
    field, type_name = KINDS[feature.dtype]
    given = features.get(feature.key)
    kind = given.WhichOneof("kind") if given is not None else None
    if kind is None:
        if feature.default is None:
            raise InvalidRequest(f"Name: <unknown>, Feature: {feature.key} (data type: {type_name}) is required but "
                                 "could not be found.")
        return feature.default
    if kind != field:
        raise InvalidRequest(f"Name: <unknown>, Key: {feature.key}, Index: {index}.  Data types don't match. Data "
                             f"type: {KIND_NAMES[kind]} but expected type: {type_name}")
    values = getattr(given, field).value
    if len(values) != int(np.prod(feature.shape)):
        raise InvalidRequest(f"Name: <unknown>, Key: {feature.key}, Index: {index}.  Number of {type_name} values != "
                             f"expected.  Values size: {len(values)} but output shape: [{','.join(map(str, feature.shape))}]")
    return np.asarray(values, feature.dtype).reshape(feature.shape)


def from_json(body: bytes) -> tuple[str, input_pb2.Input]:
    """TF Serving's REST :classify and :regress body, {"signature_name"?, "context"?, "examples": [{feature: value,
    ...}, ...]}, as (signature_name, Input): a value is one value or a list of them, integers an int64_list, numbers
    with a fraction a float_list, strings (or {"b64": ...}) a bytes_list."""
    doc = rest_json.parse_json(body)
    if not isinstance(doc, dict) or not isinstance(doc.get("examples"), list):
        raise InvalidRequest("Missing 'examples' key: the body is {\"examples\": [{feature: value, ...}, ...]}")
    name = doc.get("signature_name", "")
    if not isinstance(name, str):
        raise InvalidRequest("'signature_name' key must be a string")
    written = [_example(e).SerializeToString() for e in doc["examples"]]
    if "context" not in doc:
        return name, input_pb2.Input(example_list=input_pb2.ExampleList(examples=written))
    context = _example(doc["context"]).SerializeToString()
    return name, input_pb2.Input(example_list_with_context=input_pb2.ExampleListWithContext(examples=written,
                                                                                            context=context))


def _example(value) -> tf_example_pb2.Example:
    if not isinstance(value, dict):
        raise InvalidRequest(f"an example must be a JSON object of features, not {value!r:.64}")
    example = tf_example_pb2.Example()
    for key, given in value.items():
        values = given if isinstance(given, list) else [given]
        feature = example.features.feature[key]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            feature.int64_list.value.extend(values)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            feature.float_list.value.extend(values)
        elif all(isinstance(v, str) or rest_json.is_b64(v) for v in values):
            feature.bytes_list.value.extend(rest_json.b64_decoded(v) if isinstance(v, dict) else v.encode()
                                            for v in values)
        else:
            raise InvalidRequest(f"feature {key!r}: {given!r:.64} is not a number, a string, or a list of one kind "
                                 "of them")
    return example
