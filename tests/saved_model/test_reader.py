"""The SavedModel reader without a daemon: a TensorBundle read as TensorFlow's checkpoint reader reads it, a
signature frozen into a GraphDef that TensorFlow runs to the outputs of the SavedModel TensorFlow loads, and
clear errors for what is not a SavedModel."""
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.oracle import assert_close
from tests.saved_model.models import random_inputs, saved, tf_outputs
from xlacs.saved_model import Bundle, BundleError, SavedModel, SavedModelError
from xlacs.saved_model.bundle import OBJECT_GRAPH_KEY
from xlacs.v1 import tf_graph_pb2


@pytest.mark.parametrize("name", ["affine", "mobilenet_v2_save"])
def test_bundle_reads_every_tensor_as_tf_does(name):
    prefix = saved(name) / "variables" / "variables"
    bundle = Bundle(prefix)
    reader = tf.train.load_checkpoint(str(prefix))
    shapes = reader.get_variable_to_shape_map()
    assert set(bundle.entries) == set(shapes)
    for key, shape in shapes.items():
        want = reader.get_tensor(key)
        if key == OBJECT_GRAPH_KEY:
            assert bundle.string(key) == want
            continue
        got = bundle.tensor(key)
        assert got.dtype == want.dtype and got.shape == tuple(shape), key
        np.testing.assert_array_equal(got, want)


def test_truncated_index_is_refused(tmp_path):
    prefix = saved("affine") / "variables" / "variables"
    data = (prefix.parent / "variables.index").read_bytes()
    (tmp_path / "variables.index").write_bytes(data[:-10])
    with pytest.raises(BundleError, match="not a TensorBundle index"):
        Bundle(tmp_path / "variables")


def _run_in_tf(signature, inputs: dict) -> dict:
    graph_def = tf.compat.v1.GraphDef.FromString(signature.graph_def)
    run = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(graph_def, name=""), [])
    tensor = run.graph.get_tensor_by_name
    pruned = run.prune([tensor(s.tensor) for s in signature.inputs.values()],
                       [tensor(s.tensor) for s in signature.outputs.values()])
    outputs = pruned(*[tf.constant(inputs[n]) for n in signature.inputs])
    return {name: t.numpy() for name, t in zip(signature.outputs, outputs)}


@pytest.mark.parametrize("name, key", [("affine", "serving_default"), ("affine", "shift"),
                                       ("two_io_save", "serving_default"), ("two_io_export", "serving_default"),
                                       ("two_io_export", "serve"), ("mobilenet_v2_export", "serve"),
                                       ("lookup", "serving_default")])
def test_frozen_signature_runs_in_tf_as_the_saved_model(name, key):
    signature = SavedModel(saved(name)).signature(key)
    graph_def = tf_graph_pb2.GraphDef.FromString(signature.graph_def)
    ops = {n.op for n in graph_def.node} | {n.op for f in graph_def.library.function for n in f.node_def}
    assert not ops & {"VarHandleOp", "ReadVariableOp", "SaveV2", "RestoreV2"}, ops
    assert "Const" in ops
    inputs = random_inputs(signature, batch=3)
    want = tf_outputs(saved(name), key, inputs)
    assert sorted(want) == sorted(signature.outputs)
    got = _run_in_tf(signature, inputs)
    for output, value in want.items():
        assert np.std(value) > 1e-3, output  # not a vanished activation (TESTING.md)
        assert_close(got[output], value)


def test_a_variable_that_is_assigned_is_refused_by_name():
    with pytest.raises(SavedModelError, match="signature 'bump': variable .* is used by AssignAddVariableOp node "
                                              "'AssignAddVariableOp' in function '__inference_bump_"):
        SavedModel(saved("lookup")).signature("bump")


def test_signature_names_and_specs():
    signature = SavedModel(saved("two_io_export")).signature()
    assert sorted(signature.inputs) == ["a", "b"] and sorted(signature.outputs) == ["embedding", "score"]
    assert signature.inputs["a"].shape == (-1, 6) and signature.inputs["a"].dtype == np.float32
    assert signature.outputs["score"].shape == (-1, 2)


def test_unknown_signature_lists_the_available_ones():
    with pytest.raises(SavedModelError, match=r"no signature 'serve'.* 'serving_default', 'shift'"):
        SavedModel(saved("affine")).signature("serve")


def test_what_is_not_a_saved_model_is_named(tmp_path):
    with pytest.raises(SavedModelError, match="is not a directory"):
        SavedModel(tmp_path / "absent")
    with pytest.raises(SavedModelError, match="has no saved_model.pb"):
        SavedModel(tmp_path)
    (tmp_path / "saved_model.pb").write_bytes(b"\x08\x01\x12\x05garbage")
    with pytest.raises(SavedModelError, match="saved_model.pb"):
        SavedModel(tmp_path)


def test_missing_variables_are_named(tmp_path):
    directory = tmp_path / "affine"
    shutil.copytree(saved("affine"), directory)
    shutil.rmtree(directory / "variables")
    with pytest.raises(SavedModelError, match=r"variables\.index"):
        SavedModel(directory).signature()
