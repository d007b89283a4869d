"""Freezes a tf.function into a GraphDef with feeds and fetches (needs TensorFlow installed)."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class FrozenGraph:
    graph_def: bytes
    feeds: dict[str, tuple]  # name -> (numpy dtype, shape)
    fetches: list[str]


def freeze(fn, *input_signature, lower_control_flow: bool = True) -> FrozenGraph:
    """`fn` is a tf.function or a Python callable; `input_signature` are tf.TensorSpecs (a None dim is a feed's
    -1: known only at Execute)."""
    try:
        import tensorflow as tf
        from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    except ImportError as e:
        raise ImportError("freezing a tf.function needs TensorFlow: pip install tensorflow-cpu") from e
    function = fn if hasattr(fn, "get_concrete_function") else tf.function(fn)
    frozen = convert_variables_to_constants_v2(function.get_concrete_function(*input_signature),
                                               lower_control_flow=lower_control_flow)
    feeds = {t.name: (t.dtype.as_numpy_dtype, tuple(-1 if d is None else d for d in t.shape)) for t in frozen.inputs
             if t.dtype != tf.resource}
    return FrozenGraph(frozen.graph.as_graph_def().SerializeToString(), feeds, [t.name for t in frozen.outputs])
