"""Our SavedModel and TensorBundle proto subsets are TensorFlow's: each field has TF's number, kind and type, and a
SavedModel TensorFlow wrote parses in ours and back to the same bytes."""
import pytest
from tensorflow.core.protobuf import (meta_graph_pb2, saved_model_pb2, saved_object_graph_pb2, tensor_bundle_pb2,
                                      trackable_object_graph_pb2)

from tests.saved_model.models import saved
from xlacs.v1 import tf_graph_pb2, tf_saved_model_pb2, tf_tensor_bundle_pb2

PAIRS = [
    (tf_saved_model_pb2.SavedModel, saved_model_pb2.SavedModel),
    (tf_saved_model_pb2.MetaGraphDef, meta_graph_pb2.MetaGraphDef),
    (tf_saved_model_pb2.MetaGraphDef.MetaInfoDef, meta_graph_pb2.MetaGraphDef.MetaInfoDef),
    (tf_saved_model_pb2.TensorInfo, meta_graph_pb2.TensorInfo),
    (tf_saved_model_pb2.SignatureDef, meta_graph_pb2.SignatureDef),
    (tf_saved_model_pb2.SavedObjectGraph, saved_object_graph_pb2.SavedObjectGraph),
    (tf_saved_model_pb2.SavedObject, saved_object_graph_pb2.SavedObject),
    (tf_saved_model_pb2.SavedConcreteFunction, saved_object_graph_pb2.SavedConcreteFunction),
    (tf_saved_model_pb2.SavedVariable, saved_object_graph_pb2.SavedVariable),
    (tf_saved_model_pb2.TrackableObjectGraph, trackable_object_graph_pb2.TrackableObjectGraph),
    (tf_saved_model_pb2.TrackableObjectGraph.TrackableObject,
     trackable_object_graph_pb2.TrackableObjectGraph.TrackableObject),
    (tf_saved_model_pb2.TrackableObjectGraph.TrackableObject.ObjectReference,
     trackable_object_graph_pb2.TrackableObjectGraph.TrackableObject.ObjectReference),
    (tf_saved_model_pb2.TrackableObjectGraph.TrackableObject.SerializedTensor,
     trackable_object_graph_pb2.TrackableObjectGraph.TrackableObject.SerializedTensor),
    (tf_tensor_bundle_pb2.BundleHeaderProto, tensor_bundle_pb2.BundleHeaderProto),
    (tf_tensor_bundle_pb2.BundleEntryProto, tensor_bundle_pb2.BundleEntryProto),
]


@pytest.mark.parametrize("ours, theirs", PAIRS, ids=[o.DESCRIPTOR.name for o, _ in PAIRS])
def test_fields_are_tensorflows(ours, theirs):
    for field in ours.DESCRIPTOR.fields:
        tf_field = theirs.DESCRIPTOR.fields_by_name[field.name]
        assert field.number == tf_field.number, field.name
        assert field.is_repeated == tf_field.is_repeated, field.name
        # BundleEntryProto.slices: TF's TensorSliceProto messages, read by us as bytes (same wire type).
        if field.type != field.TYPE_BYTES or tf_field.type != tf_field.TYPE_MESSAGE:
            assert field.type == tf_field.type, field.name
        if field.message_type is not None:
            assert field.message_type.name == tf_field.message_type.name, field.name


def test_a_saved_model_round_trips():
    data = (saved("two_io_export") / "saved_model.pb").read_bytes()
    ours = tf_saved_model_pb2.SavedModel.FromString(data)
    assert ours.meta_graphs[0].signature_def["serve"].inputs["a"].dtype == tf_graph_pb2.DT_FLOAT
    theirs = saved_model_pb2.SavedModel.FromString(ours.SerializeToString())
    assert theirs == saved_model_pb2.SavedModel.FromString(data)
