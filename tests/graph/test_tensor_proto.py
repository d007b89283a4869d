"""TensorProto decoding follows TF's rules, and bad tensors are typed errors, never crashes."""
import numpy as np
import pytest
import tensorflow as tf

from xlacs.v1 import tf_graph_pb2
from xlacs_server.graph import tensor_proto


def decode(proto: tf_graph_pb2.TensorProto):
    return tensor_proto.to_numpy(proto, max_elements=1 << 20)


@pytest.mark.parametrize("value", [np.arange(6, dtype=np.int32).reshape(2, 3), np.float16([1.5, -2]),
                                   np.array([1 + 2j], np.complex64), np.array([True, False]), np.int64(7)])
def test_matches_tf_make_tensor_proto(value):
    ours = tf_graph_pb2.TensorProto.FromString(tf.make_tensor_proto(value).SerializeToString())
    np.testing.assert_array_equal(decode(ours), value)


def test_last_value_repeats_and_reference_types_hold_their_base_type():
    proto = tf_graph_pb2.TensorProto(dtype=tf_graph_pb2.DT_INT32_REF, int_val=[1, 2])
    proto.tensor_shape.dim.add(size=4)
    np.testing.assert_array_equal(decode(proto), [1, 2, 2, 2])


def test_content_size_disagreeing_with_shape_is_a_bad_tensor():
    proto = tf_graph_pb2.TensorProto(dtype=tf_graph_pb2.DT_FLOAT, tensor_content=b"\0" * 7)
    proto.tensor_shape.dim.add(size=2)
    with pytest.raises(tensor_proto.BadTensor, match="7 bytes"):
        decode(proto)
