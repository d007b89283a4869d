"""Every registered lowering, of every ops module and platform, against TF's own OpDef (op_def_registry): the
attrs it takes, which are required, the dtypes it allows, and no default of TF's restated in a rule; and a node
that leaves attrs at their defaults lowers with TF's."""
import inspect

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import op_def_registry

from tests.graphs import GraphBuilder
from tests.oracle import assert_close, rand
from xlacs import dtypes as wire_dtypes
from xlacs_server.lower import ops, registry  # noqa: F401  (importing ops registers the lowerings)


def lowering_id(lowering: registry.Lowering) -> str:
    return lowering.op + (f"[{lowering.platform}]" if lowering.platform else "")


@pytest.mark.parametrize("lowering", registry.registrations(), ids=lowering_id)
def test_registration_matches_the_tf_opdef(lowering):
    """The rule takes exactly TF's attrs, each required exactly where TF has no default, declares no default of
    its own (the importer gives the node TF's), and allows only dtypes that TF's OpDef allows."""
    op_def = op_def_registry.get(lowering.op)
    assert op_def is not None, f"{lowering.op} is not a TF op"
    tf_attrs = {a.name: a for a in op_def.attr}
    assert set(lowering.attrs) == set(tf_attrs)
    defaulted = {name for name, a in tf_attrs.items() if a.HasField("default_value")}
    assert {name for name, required in lowering.attrs.items() if not required} == defaulted
    own_defaults = [p.name for p in inspect.signature(lowering.rule).parameters.values()
                    if p.kind is p.KEYWORD_ONLY and p.default is not p.empty]
    assert own_defaults == [], "TF's OpDef says what an attr's default is: drop the rule's"
    if lowering.dtypes is not None:
        assert lowering.type_attr in tf_attrs
        allowed = set(tf_attrs[lowering.type_attr].allowed_values.list.type)
        outside = {d for d in lowering.dtypes if wire_dtypes.from_numpy(d) not in allowed}
        assert not allowed or not outside, f"not in TF's OpDef: {outside}"


def test_a_node_without_its_defaulted_attrs_lowers_with_tfs_defaults(client):
    """A GraphDef need not spell out attrs left at their defaults (TF's importer fills them in): Conv2D without
    data_format, dilations, explicit_paddings and use_cudnn_on_gpu, DepthwiseConv2dNative (the CPU override)
    likewise, LeakyRelu without alpha and Squeeze without squeeze_dims compute what TF computes."""
    b = GraphBuilder()
    b.placeholder("x", (1, 6, 6, 2))
    b.placeholder("w", (3, 3, 2, 2))
    b.op("conv", "Conv2D", "x", "w", strides=[1, 1, 1, 1], padding="SAME")
    b.op("depthwise", "DepthwiseConv2dNative", "conv", "w", strides=[1, 2, 2, 1], padding="VALID")
    b.op("leaky", "LeakyRelu", "depthwise")
    b.op("squeezed", "Squeeze", "leaky")
    for node in b.graph_def.node:
        assert {"data_format", "dilations", "alpha", "squeeze_dims"}.isdisjoint(node.attr)
    x, w = rand((1, 6, 6, 2)), rand((3, 3, 2, 2))
    feeds = {"x:0": (np.float32, x.shape), "w:0": (np.float32, w.shape)}
    got, = client.compile(b.bytes(), feeds, ["squeezed:0"]).execute({"x:0": x, "w:0": w})

    graph_def = tf.compat.v1.GraphDef.FromString(b.bytes())
    run = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(graph_def, name=""), [])
    want = run.prune(["x:0", "w:0"], "squeezed:0")(tf.constant(x), tf.constant(w))
    assert_close(got, want.numpy())
