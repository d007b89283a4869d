"""ONNX Runtime on CPU: tf2onnx converts the frozen GraphDef (as a user of ONNX Runtime with a TensorFlow model
would), then an InferenceSession with the CPU execution provider and its default threads and graph
optimizations runs it. The conversion is part of the first call."""
from __future__ import annotations

import onnxruntime
import tensorflow as tf
import tf2onnx

from benchmarks.peers import Call
from benchmarks.peers.files import GraphFiles

OPSET = 17


def build(graph: GraphFiles) -> Call:
    feeds, fetches = graph.signature()
    graph_def = tf.compat.v1.GraphDef.FromString(graph.graph_def)
    model, _ = tf2onnx.convert.from_graph_def(graph_def, input_names=list(feeds), output_names=fetches,
                                              opset=OPSET)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = list(feeds)
    return lambda *arrays: session.run(fetches, dict(zip(names, arrays)))
