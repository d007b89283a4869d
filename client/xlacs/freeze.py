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


@dataclasses.dataclass
class UnfrozenGraph:
    """A tf.function's graph with its resource variables left as variables (docs/training.md): each is an input of
    the executable, `variables/<name>`, that a variable state holds, and the values the graph assigns come back."""
    graph_def: bytes
    feeds: dict[str, tuple]  # the inputs' feeds, then each variable's placeholder with its value's dtype and shape
    fetches: list[str]
    variables: dict[str, object]  # the variable's name in a state (its input without "variables/") -> tf.Variable

    def values(self) -> dict[str, object]:
        """The variables' current values by name in a state: what Client.create_state starts from."""
        return {name: variable.numpy() for name, variable in self.variables.items()}


def unfrozen(fn, *input_signature) -> UnfrozenGraph:
    """A tf.function's graph as TF traces it, for `input_signature` (tf.TensorSpecs of static shapes): it captures
    each variable as a resource placeholder, which the feeds declare with the variable's dtype and shape."""
    import tensorflow as tf
    concrete = fn.get_concrete_function(*input_signature)
    feeds = {t.name: (t.dtype.as_numpy_dtype, tuple(t.shape)) for t in concrete.inputs if t.dtype != tf.resource}
    by_handle = {id(v.handle): v for v in concrete.variables}
    variables = {internal.name: by_handle[id(external)] for external, internal in concrete.graph.captures
                 if id(external) in by_handle}
    feeds.update({name: (v.dtype.as_numpy_dtype, tuple(v.shape)) for name, v in variables.items()})
    return UnfrozenGraph(concrete.graph.as_graph_def().SerializeToString(), feeds, [t.name for t in concrete.outputs],
                         {name.rsplit(":", 1)[0]: v for name, v in variables.items()})
