"""TensorProto <-> arrays as TensorFlow reads and writes them (tf.make_tensor_proto and tf.make_ndarray are the
oracle), and TF Serving's protos of xlacs living beside TensorFlow's in one process."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import descriptor_pool
from tensorflow.core.framework import tensor_pb2

from xlacs.v1 import tf_graph_pb2
from xlacs_server.errors import InvalidRequest
from xlacs_server.tfserving import tensors
from xlacs_server.tfserving.apis import get_model_metadata_pb2, prediction_service_pb2

DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.int16, np.int32, np.int64, np.uint8,
          np.uint16, np.uint32, np.uint64, np.bool_]


def _ours(proto) -> tf_graph_pb2.TensorProto:
    return tf_graph_pb2.TensorProto.FromString(proto.SerializeToString())


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_arrays_round_trip_through_tensorflow(dtype):
    array = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    # tensor_content in (what make_tensor_proto writes for an array), typed fields out (what TF Serving writes).
    np.testing.assert_array_equal(tensors.to_array(_ours(tf.make_tensor_proto(array)), "x"), array)
    written = tf.make_ndarray(tensor_pb2.TensorProto.FromString(tensors.from_array(array).SerializeToString()))
    assert written.dtype == array.dtype
    np.testing.assert_array_equal(written, array)
    assert not tensors.from_array(array).tensor_content
    empty = np.zeros((0, 4), dtype)
    assert tf.make_ndarray(tensor_pb2.TensorProto.FromString(tensors.from_array(empty).SerializeToString())).shape == \
        (0, 4)


@pytest.mark.parametrize("values", [[], [1.5], [1.5, -2.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]])
def test_typed_fields_fill_as_tensorflow_does(values):
    proto = tf.make_tensor_proto([], dtype=tf.float32, shape=[2, 3])
    proto.float_val.extend(values)
    np.testing.assert_array_equal(tensors.to_array(_ours(proto), "x"), tf.make_ndarray(proto))


def test_half_values_are_their_bits():
    proto = tf.make_tensor_proto([], dtype=tf.float16, shape=[3])
    proto.half_val.extend(np.array([0.5, -2.0, 65504.0], np.float16).view(np.uint16).tolist())
    np.testing.assert_array_equal(tensors.to_array(_ours(proto), "x"), tf.make_ndarray(proto))


def test_malformed_tensors_name_their_alias():
    too_many = tf.make_tensor_proto([], dtype=tf.float32, shape=[2])
    too_many.float_val.extend([1.0, 2.0, 3.0])
    short = tf.make_tensor_proto(np.zeros(4, np.float32))
    short.tensor_content = short.tensor_content[:-1]
    for proto, why in ((too_many, "float_val has 3 values"), (short, "tensor_content has 15 bytes"),
                       (tf.make_tensor_proto(["a"]), "dtype string")):
        with pytest.raises(InvalidRequest, match=f"tensor parsing error: x: .*{why}"):
            tensors.to_array(_ours(proto), "x")


def test_tf_servings_names_live_beside_tensorflows():
    """TensorFlow registers tensorflow.TensorProto, tensorflow.SignatureDef...; ours are tensorflow.serving.* over
    xlacs's copies, so both import in one process and SignatureDefMap has TF Serving's full name."""
    pool = descriptor_pool.Default()
    assert pool.FindMessageTypeByName("tensorflow.TensorProto") is not None  # TensorFlow's, imported above
    assert get_model_metadata_pb2.SignatureDefMap.DESCRIPTOR.full_name == "tensorflow.serving.SignatureDefMap"
    assert prediction_service_pb2.DESCRIPTOR.services_by_name["PredictionService"].full_name == \
        "tensorflow.serving.PredictionService"
