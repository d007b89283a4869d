"""Each pass on small before/after graphs, and the registry's ordering."""
import jax
import numpy as np
import pytest
import tensorflow as tf
from jax._src.dispatch import BACKEND_COMPILE_EVENT
from tensorflow.python.framework import function as tf_function

import xlacs_server.service  # noqa: F401  (registers passes and lowerings)
from tests import tf1
from tests.graphs import GraphBuilder
from tests.oracle import rand
from xlacs_server.config import Settings
from xlacs_server.errors import InvalidNode, UnsupportedNode, UnsupportedOps
from xlacs_server.graph import op_defs
from xlacs_server.graph.function_def import to_graph
from xlacs_server.graph.importer import import_graph
from xlacs_server.graph.ir import Endpoint
from xlacs_server.passes import (
    constant_fold, cse, infer_shapes, mark_for_compilation, prune, registry, remove_identities)
from xlacs_server.passes.registry import Grouping, pipeline, register_pass, run_pipeline

# The pipeline as README.md's Passes step describes it, in run order.
PIPELINE = [
    ("POST_IMPORT", "prune"), ("POST_IMPORT", "function_call_nodes"), ("POST_IMPORT", "functionalize_control_flow"),
    ("POST_IMPORT", "inline_calls"),
    ("OPTIMIZATION", "mark_for_compilation"), ("OPTIMIZATION", "remove_identities"), ("OPTIMIZATION", "constant_fold"),
    ("OPTIMIZATION", "cse"), ("OPTIMIZATION", "dce"),
    ("PRE_LOWERING", "infer_shapes"), ("PRE_LOWERING", "fold_batch_norm"), ("PRE_LOWERING", "winograd"),
]


def test_the_pipeline_runs_the_documented_passes_in_order():
    assert [(p.grouping.name, p.name) for p in pipeline()] == PIPELINE


def test_grouping_then_phase_order_the_passes_and_registration_order_breaks_ties(monkeypatch):
    monkeypatch.setattr(registry, "_PASSES", [])  # a scratch registry: the real one is back after the test
    registered = [("late", Grouping.PRE_LOWERING, 0), ("zeta", Grouping.OPTIMIZATION, 20),
                  ("early", Grouping.POST_IMPORT, 30), ("middle", Grouping.OPTIMIZATION, 10),
                  ("alpha", Grouping.OPTIMIZATION, 20)]  # a tie: registered after zeta, so it runs after zeta
    for name, grouping, phase in registered:
        def unchanged(graph):
            return graph
        unchanged.__name__ = name
        register_pass(grouping, phase)(unchanged)
    assert [p.name for p in pipeline()] == ["early", "middle", "zeta", "alpha", "late"]


def test_a_pass_registered_twice_is_refused():
    with pytest.raises(RuntimeError, match="registered twice"):
        register_pass(Grouping.OPTIMIZATION, 99)(prune.prune)


def test_prune_keeps_what_fetches_need_and_stops_at_feeds():
    b = GraphBuilder()
    b.placeholder("x")
    b.op("upstream", "Neg", "x")
    b.op("y", "Exp", "upstream")
    b.op("z", "Relu", "y")
    b.op("unused", "Tanh", "x")
    graph = prune.prune(b.graph(["upstream:0"], ["z:0"]))
    assert set(graph.nodes) == {"upstream", "y", "z"}
    assert graph.nodes["upstream"].inputs == []


def test_remove_identities_forwards_data_and_keeps_control_edges():
    b = GraphBuilder()
    b.placeholder("x")
    b.node("gate", "NoOp")
    b.op("id1", "Identity", "x", "^gate")
    b.op("id2", "StopGradient", "id1")
    b.op("y", "Neg", "id2")
    b.op("out", "Identity", "y")
    graph = remove_identities.remove_identities(b.graph(["x:0"], ["out:0"]))
    assert set(graph.nodes) == {"x", "y", "out"}  # the fetched Identity stays
    assert graph.nodes["y"].inputs == [Endpoint("x", 0)]
    assert graph.nodes["y"].control_inputs == []  # gate was a NoOp with no inputs: nothing to inherit


def test_remove_identities_inherits_control_inputs():
    b = GraphBuilder()
    b.placeholder("x")
    b.placeholder("c")
    b.op("side", "Neg", "c")
    b.op("id", "Identity", "x", "^side")
    b.op("y", "Neg", "id")
    graph = remove_identities.remove_identities(b.graph(["x:0", "c:0"], ["y:0"]))
    assert "id" not in graph.nodes and graph.nodes["y"].control_inputs == ["side"]


def test_constant_fold_folds_shape_arithmetic_but_not_balloons():
    b = GraphBuilder()
    b.placeholder("x", shape=(4, 6))
    b.const("a", np.int32(3))
    b.const("b", np.int32(4))
    b.op("prod", "Mul", "a", "b", T=np.int32)
    b.const("dims", np.array([1024, 1024], np.int32))
    b.const("one", np.float32(1))
    b.node("big", "Fill", "dims", "one", T=np.dtype(np.float32), index_type=np.dtype(np.int32))
    b.const("shape", np.array([-1], np.int32))
    b.node("flat", "Reshape", "x", "shape", T=np.dtype(np.float32), Tshape=np.dtype(np.int32))
    graph = constant_fold.constant_fold(b.graph(["x:0"], ["prod:0", "big:0", "flat:0"]))
    assert graph.nodes["prod"].op == "Const" and graph.nodes["prod"].attrs["value"] == 12
    assert graph.nodes["big"].op == "Fill"  # 4 MiB from 12 bytes: not folded
    assert graph.nodes["flat"].op == "Reshape"


def test_constant_fold_folds_shape_ops_with_numpy_without_an_xla_compile():
    # jax.numpy would compile each op for each new shape (EfficientNetB0's squeeze-excite Squeezes: 8 compiles).
    b = GraphBuilder()
    value = np.arange(7 * 5, dtype=np.float32).reshape(1, 7, 1, 5)
    b.const("c", value)
    b.node("squeezed", "Squeeze", "c", T=np.dtype(np.float32), squeeze_dims=[0, 2])
    b.const("dim", np.int32(-1))
    b.node("expanded", "ExpandDims", "squeezed", "dim", T=np.dtype(np.float32), Tdim=np.dtype(np.int32))
    b.const("perm", np.array([2, 0, 1], np.int32))
    b.node("transposed", "Transpose", "expanded", "perm", T=np.dtype(np.float32), Tperm=np.dtype(np.int32))
    compiles = []
    listener = lambda event, duration, **kwargs: compiles.append(event) if event == BACKEND_COMPILE_EVENT else None
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        graph = constant_fold.constant_fold(b.graph([], ["transposed:0"]))
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    folded = graph.nodes["transposed"]
    assert folded.op == "Const" and folded.attrs["value"].dtype == np.float32
    np.testing.assert_array_equal(folded.attrs["value"], value.reshape(7, 5, 1).transpose(2, 0, 1))
    assert compiles == []


def test_cse_merges_equal_nodes_only():
    b = GraphBuilder()
    b.placeholder("x")
    b.op("e1", "Exp", "x")
    b.op("e2", "Exp", "x")
    b.op("t", "Tanh", "x")
    b.op("sum", "AddV2", "e1", "e2")
    b.op("out", "AddV2", "sum", "t")
    graph = cse.cse(b.graph(["x:0"], ["out:0"]))
    assert "e2" not in graph.nodes and graph.nodes["sum"].inputs == [Endpoint("e1", 0), Endpoint("e1", 0)]
    assert "t" in graph.nodes


def test_dce_drops_orphans_and_unused_functions():
    b = GraphBuilder()
    b.placeholder("x")
    b.op("y", "Neg", "x")
    b.graph_def.library.function.add().signature.name = "never_called"
    graph = b.graph(["x:0"], ["y:0"])
    graph = graph.replace(nodes={**graph.nodes, "orphan": graph.nodes["y"].__class__(
        "orphan", "Exp", [Endpoint("x", 0)], [], {"T": np.dtype(np.float32)})})
    graph = prune.dce(graph)
    assert set(graph.nodes) == {"x", "y"} and graph.library == {}


def test_infer_shapes_annotates_and_names_the_bad_node():
    b = GraphBuilder()
    b.placeholder("x", shape=(2, 3))
    b.const("w", np.ones((3, 5), np.float32))
    b.op("mm", "MatMul", "x", "w")
    graph = infer_shapes.infer_shapes(b.graph(["x:0"], ["mm:0"]))
    assert graph.nodes["mm"].attrs["_output_shapes"] == [(2, 5)]
    assert graph.nodes["mm"].attrs["_output_dtypes"] == [np.dtype(np.float32)]
    bad = GraphBuilder()
    bad.placeholder("x", shape=(2, 3))
    bad.const("w", np.ones((4, 5), np.float32))
    bad.op("mm", "MatMul", "x", "w")
    with pytest.raises(InvalidNode, match="'mm'"):
        infer_shapes.infer_shapes(bad.graph(["x:0"], ["mm:0"]))


def test_mark_for_compilation_reports_regions_and_their_cuts():
    b = GraphBuilder()
    b.placeholder("x")
    b.op("a", "Neg", "x")
    b.node("s1", "NoSuchOpA", "a")
    b.node("s2", "NoSuchOpB", "s1")
    b.op("out", "Exp", "s2")
    with pytest.raises(UnsupportedOps) as e:
        mark_for_compilation.mark_for_compilation(b.graph(["x:0"], ["out:0"]))
    assert set(e.value.nodes_by_op) == {"NoSuchOpA", "NoSuchOpB"}
    regions = mark_for_compilation.unsupported_regions(b.graph(["x:0"], ["out:0"]), {"s1", "s2"})
    assert regions == [{"nodes": ["s1", "s2"], "inputs": ["a:0"], "outputs": ["s2:0"]}]


def test_mark_for_compilation_rejects_unknown_attrs():
    b = GraphBuilder()
    b.placeholder("x")
    b.op("y", "Neg", "x", bogus=3)
    with pytest.raises(InvalidNode, match="unknown attr"):
        mark_for_compilation.mark_for_compilation(b.graph(["x:0"], ["y:0"]))


def test_tf1_control_flow_in_no_loop_or_cond_is_unimplemented_naming_the_node():
    """A NextIteration with no loop frame around it (a fuzzed graph had one in a cond's branch): functionalization
    leaves it, and the check names it instead of the lowering failing on an op it has no rule for."""
    b = GraphBuilder()
    b.placeholder("x")
    b.op("n", "NextIteration", "x")
    b.op("y", "Neg", "n")
    with pytest.raises(UnsupportedNode, match="node 'n' \\(NextIteration\\).*part of neither"):
        mark_for_compilation.mark_for_compilation(b.graph(["x:0"], ["y:0"]))


def test_the_nodes_passes_write_hold_every_attr_of_their_opdef():
    """As the importer gives every node the attrs its OpDef defaults, so do the passes that write nodes
    (op_defs.new_node): the PartitionedCall of a TF1 Defun call, the While and If of TF1 control flow, the nodes
    of a folded BatchNorm, in the graph and in the functions the passes write."""
    graph = tf.Graph()
    with tf1.control_flow_v1(), graph.as_default():
        @tf_function.Defun(tf.float32)
        def twice(a):
            return a * 2.0

        x = tf.compat.v1.placeholder(tf.float32, (1, 4, 4, 3), name="x")
        y = tf.nn.bias_add(tf.nn.conv2d(x, tf.constant(rand((1, 1, 3, 4))), 1, "SAME"), tf.constant(rand((4,))))
        y = tf.raw_ops.FusedBatchNormV3(x=y, scale=tf.constant(rand((4,))), offset=tf.constant(rand((4,))),
                                        mean=tf.constant(rand((4,))), variance=tf.constant(rand((4,), low=0.5)),
                                        is_training=False)[0]
        y = tf.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, tf.cond(a[0, 0, 0, 0] > 0, lambda: a - 1.0,
                                                                           lambda: -a)), (0, y))[1]
        out = twice(y)  # fetched, so the call stays a call
    imported = import_graph(graph.as_graph_def().SerializeToString(), Settings())  # every attr spelled out
    imported = imported.replace(feeds=[Endpoint("x")], fetches=[Endpoint.parse(out.name)],
                                feed_specs=[(np.dtype(np.float32), (1, 4, 4, 3))])
    passed, _ = run_pipeline(imported)
    bodies = [to_graph(f, {}, Settings.max_tensor_elements) for f in passed.library.values()]
    nodes = [*passed.nodes.values(), *(n for body in bodies for n in body.nodes.values())]
    assert {"PartitionedCall", "While", "If", "BiasAdd", "Reshape"} <= {n.op for n in nodes}
    assert any("/folded/" in n.name for n in nodes)
    for node in nodes:
        assert set(op_defs.attr_defs(node.op) or {}) <= set(node.attrs), f"{node.name} ({node.op})"
