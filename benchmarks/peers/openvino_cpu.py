"""OpenVINO on CPU: its TensorFlow frontend reads the frozen GraphDef file, cut at the feeds and fetches, and
compiles it with f32 inference precision (without the hint it may compute in bf16 on CPUs that have it, which
would not compare like with like). Threads and streams are OpenVINO's defaults for its LATENCY hint. An infer
request serves one call at a time, so each thread that calls gets its own (the throughput under load)."""
from __future__ import annotations

import threading

import numpy as np
import openvino

from benchmarks.peers import Call
from benchmarks.peers.files import GraphFiles

CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}


def build(graph: GraphFiles) -> Call:
    feeds, fetches = graph.signature()
    model = openvino.convert_model(str(graph.graph_path), input=[(name, list(shape)) for name, (_, shape)
                                                                 in feeds.items()], output=fetches)
    compiled = openvino.Core().compile_model(model, "CPU", CONFIG)
    requests = threading.local()
    names = list(feeds)

    def call(*arrays):
        if not hasattr(requests, "request"):
            requests.request = compiled.create_infer_request()
        results = requests.request.infer(dict(zip(names, arrays)))
        # The request's output tensors are reused by its next call: numpy out means a copy, as TF's .numpy().
        return [np.array(results[name]) for name in fetches]
    return call
