"""SavedModels as Estimator's exporters wrote them (TensorFlow 1 graphs, built here with tf.compat.v1 since Estimator
left TensorFlow in 2.16): a DT_STRING placeholder `input_example_tensor` of serialized tf.Examples into ParseExampleV2
(build_parsing_serving_input_receiver_fn), resource variables restored from the checkpoint, and a canned head's
signatures: classify (`classes`: the label vocabulary, or AsString(range(n_classes)), tiled by the batch; `scores`),
regress (`outputs`) and predict. TensorFlow running the same signature on the serialized examples is the oracle."""
from __future__ import annotations

import pathlib

import numpy as np
import tensorflow as tf

FEATURES = {"x": tf.io.FixedLenFeature([3], tf.float32),
            "n": tf.io.FixedLenFeature([], tf.int64, default_value=2)}
LABELS = [b"cat", b"dog", b"eel"]


def build(path: pathlib.Path, head: str, *, labels=LABELS, features=None) -> pathlib.Path:
    """head: "classifier" (classify as serving_default, regress as "regression", predict), "regressor" (regress as
    serving_default), "class_ids" (classify whose classes are AsString of the argmax: not a label row)."""
    sd = tf.compat.v1.saved_model
    with tf.Graph().as_default():
        serialized = tf.compat.v1.placeholder(tf.string, [None], name="input_example_tensor")
        parsed = tf.io.parse_example(serialized, features or FEATURES)
        x = tf.concat([parsed["x"], tf.cast(parsed["n"], tf.float32)[:, None]], 1)
        rng = np.random.default_rng(len(head))
        kernel = tf.compat.v1.get_variable("dense/kernel", initializer=rng.normal(size=(4, 3)).astype(np.float32))
        bias = tf.compat.v1.get_variable("dense/bias", initializer=rng.normal(size=3).astype(np.float32))
        logits = tf.matmul(x, kernel) + bias
        scores = tf.nn.softmax(logits)
        row = tf.constant(labels) if labels else tf.strings.as_string(tf.range(3))
        classes = tf.tile(tf.expand_dims(row, 0), [tf.shape(scores)[0], 1])
        value = tf.reduce_sum(logits, 1, keepdims=True)
        signatures = {
            "classifier": {"serving_default": sd.classification_signature_def(serialized, classes, scores),
                           "regression": sd.regression_signature_def(serialized, value),
                           "predict": sd.predict_signature_def({"examples": serialized}, {"probabilities": scores})},
            "regressor": {"serving_default": sd.regression_signature_def(serialized, value)},
            "class_ids": {"serving_default": sd.classification_signature_def(
                serialized, tf.strings.as_string(tf.argmax(logits, 1))[:, None], tf.reduce_max(scores, 1,
                                                                                             keepdims=True))},
        }[head]
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            builder = sd.Builder(str(path))
            builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map=signatures)
            builder.save()
    return path


def example(**features) -> bytes:
    """A serialized tf.Example: floats a float_list, ints an int64_list, bytes a bytes_list."""
    def feature(values):
        values = values if isinstance(values, list) else [values]
        if all(isinstance(v, int) for v in values):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        if all(isinstance(v, bytes) for v in values):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Example(features=tf.train.Features(
        feature={k: feature(v) for k, v in features.items()})).SerializeToString()


def run(path: pathlib.Path, key: str, serialized: list[bytes]) -> dict[str, np.ndarray]:
    """The oracle: TensorFlow's run of signature `key` on the serialized examples."""
    function = tf.saved_model.load(str(path)).signatures[key]
    return {k: v.numpy() for k, v in function(inputs=tf.constant(serialized)).items()}
