"""ONNX Runtime on CPU: tf2onnx converts the frozen GraphDef (as a user of ONNX Runtime with a TensorFlow model
would), then an InferenceSession with the CPU execution provider and its default threads and graph
optimizations runs it. The conversion is part of the first call.

TensorFlow's exact GELU (tf.nn.gelu, Keras' default "gelu") computes 0.5·x·erfc(-x/√2) since TF 2.13, and tf2onnx
1.17 has no rule for Erfc: it passes the node through, and ONNX Runtime refuses the model ("No Op registered for
Erfc"). ONNX has Erf, not Erfc, so the conversion is given the handler that tf2onnx's users write for it (the
workaround in onnx/tensorflow-onnx issue 2347): Erfc(x) = 1 - Erf(x).

Keras 3 wraps a grouped convolution (ConvNeXt's Conv2D(groups=channels)) in a function marked _XlaMustCompile and
_noinline, since TF's CPU kernels have none: tf2onnx keeps such a call as a StatefulPartitionedCall node, which ONNX
Runtime refuses. With the two marks cleared, the graph optimization tf2onnx runs first inlines the function."""
from __future__ import annotations

import numpy as np
import onnxruntime
import tensorflow as tf
import tf2onnx

from benchmarks.peers import Call
from benchmarks.peers.files import GraphFiles

OPSET = 17
NOT_INLINED = ("_XlaMustCompile", "_noinline")  # the marks that keep a function call from being inlined


def _erfc_as_one_minus_erf(ctx, node, name, args):
    """tf2onnx's custom op handler: the Erfc node becomes Erf, and a Sub from 1 takes its consumers."""
    node.type = "Erf"
    dtype = tf2onnx.utils.map_onnx_to_numpy_type(ctx.get_dtype(node.output[0]))
    one = ctx.make_const(tf2onnx.utils.make_name(f"{name}/one"), np.ones((), dtype))
    ctx.insert_new_node_on_output("Sub", node.output[0], name=tf2onnx.utils.make_name(f"{name}/one_minus"),
                                  inputs=[one.output[0], node.output[0]])
    return node


def build(graph: GraphFiles) -> Call:
    feeds, fetches = graph.signature()
    graph_def = tf.compat.v1.GraphDef.FromString(graph.graph_def)
    for attrs in [node.attr for node in graph_def.node] + [function.attr for function in graph_def.library.function]:
        for mark in NOT_INLINED:
            attrs.pop(mark, None)
    model, _ = tf2onnx.convert.from_graph_def(graph_def, input_names=list(feeds), output_names=fetches,
                                              opset=OPSET, custom_op_handlers={"Erfc": (_erfc_as_one_minus_erf, [])})
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = list(feeds)
    return lambda *arrays: session.run(fetches, dict(zip(names, arrays)))
