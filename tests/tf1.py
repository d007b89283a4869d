"""TF1 graphs as old models have them: TensorArrayV3 ops and tf.while_loop/tf.cond as Enter/Exit/Switch/Merge
built directly (control flow v1), run in a tf.compat.v1.Session as the oracle."""
import contextlib

import tensorflow as tf
from tensorflow.python.ops import control_flow_util


@contextlib.contextmanager
def control_flow_v1():
    """While active, tf.TensorArray makes TensorArrayV3 ops and tf.while_loop/tf.cond make TF1 frames."""
    saved = control_flow_util.ENABLE_CONTROL_FLOW_V2
    control_flow_util.ENABLE_CONTROL_FLOW_V2 = False
    try:
        yield
    finally:
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = saved


def run(graph: tf.Graph, feeds: dict, fetches: list):
    with tf.compat.v1.Session(graph=graph) as session:
        return session.run(fetches, feeds)
