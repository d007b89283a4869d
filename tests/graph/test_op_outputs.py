"""Flat positions and `node:arg:index` names convert both ways by TF's OpDefs, including list-valued outputs."""
import numpy as np
import pytest

from xlacs_server.graph import op_outputs
from xlacs_server.graph.ir import Node


def node(op, **attrs):
    return Node("n", op, [], [], attrs)


@pytest.mark.parametrize("n, name, index, flat", [
    (node("Switch", T=np.dtype(np.float32)), "output_true", 0, 1),
    (node("Split", T=np.dtype(np.float32), num_split=4), "output", 3, 3),
    (node("Unique", T=np.dtype(np.int32), out_idx=np.dtype(np.int64)), "idx", 0, 1),
    (node("FusedBatchNormV3", T=np.dtype(np.float32), U=np.dtype(np.float32)), "batch_variance", 0, 2),
    (node("While", T=[np.dtype(np.int32), np.dtype(np.float32)]), "output", 1, 1),
])
def test_flat_index_and_back(n, name, index, flat):
    assert op_outputs.flat_index(n, name, index) == flat
    assert op_outputs.arg_of(n, flat) == (name, index)


def test_output_dtypes_follow_attrs():
    unique = node("Unique", T=np.dtype(np.int32), out_idx=np.dtype(np.int64))
    assert op_outputs.output_dtype(unique, 0) == np.int32 and op_outputs.output_dtype(unique, 1) == np.int64
    assert op_outputs.output_dtype(node("Less", T=np.dtype(np.float32)), 0) == np.bool_
    assert op_outputs.output_dtype(node("TensorArrayV3", dtype=np.dtype(np.float32)), 0) == "DT_RESOURCE"


def test_bad_names_are_errors():
    with pytest.raises(ValueError, match="no output named 'y'"):
        op_outputs.flat_index(node("Switch"), "y", 0)
    with pytest.raises(ValueError, match="has 4 tensor"):
        op_outputs.flat_index(node("Split", num_split=4), "output", 4)


def test_an_op_tensorflow_does_not_know_has_one_output_arg():
    assert op_outputs.flat_index(node("MyCustomOp"), "anything", 2) == 2
    assert op_outputs.output_dtype(node("MyCustomOp"), 0) is None
