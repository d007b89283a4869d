"""The graphs of the GPU run, made with TensorFlow (prepare.py): Keras CNNs frozen with an unknown batch, the
suite's BERT-style encoder, an LSTM as TF1 builds it (Enter/Exit/Switch/Merge and TensorArrays in a while loop),
and a Keras model saved as a SavedModel with an unknown batch."""
from __future__ import annotations

import dataclasses
import pathlib

import keras
import numpy as np
import tensorflow as tf

from benchmarks import language_models
from tests import tf1
from tests.models.keras_models import frozen_keras
from xlacs.freeze import FrozenGraph

CNN_BATCHES = (1, 64)  # batch 1 is checked against TensorFlow; both are timed against JAX and PyTorch


@dataclasses.dataclass
class Graph:
    name: str
    frozen: FrozenGraph  # feeds may leave the batch unknown (-1)
    batches: tuple[int, ...]  # the batch sizes the run compiles; the first is checked against TensorFlow
    vocabulary: int = 0  # int32 token ids below it, for a graph fed token ids
    torchvision: str = ""  # the torchvision model a GPU user would run instead


def cnn(name: str, torchvision: str = "") -> Graph:
    frozen, _ = frozen_keras(name, (None, 224, 224, 3))
    return Graph(name, frozen, CNN_BATCHES, torchvision=torchvision)


def bert_encoder() -> Graph:
    frozen, _ = language_models.bert_encoder(1)
    return Graph("BertEncoder", frozen, (1,), vocabulary=8000)


def tf1_lstm(steps: int = 32, features: int = 64, units: int = 128) -> Graph:
    """h after `steps` steps of an LSTM cell written as TF1 graphs have it: the input unstacked into a TensorArray
    read in a tf.while_loop of control flow v1."""
    graph = tf.Graph()
    rng = np.random.default_rng(0)
    with tf1.control_flow_v1(), graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, steps, features], name="x")
        kernel = tf.constant(rng.normal(0, (features + units) ** -0.5, (features + units, 4 * units)), tf.float32)
        bias = tf.constant(rng.normal(0, 0.1, 4 * units), tf.float32)
        inputs = tf.TensorArray(tf.float32, size=steps).unstack(tf.transpose(x, [1, 0, 2]))

        def step(t, h, c):
            i, f, g, o = tf.split(tf.matmul(tf.concat([inputs.read(t), h], 1), kernel) + bias, 4, axis=1)
            c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(g)
            return t + 1, tf.sigmoid(o) * tf.tanh(c), c
        zeros = tf.zeros(tf.stack([tf.shape(x)[0], units]))
        _, h, _ = tf.while_loop(lambda t, *_: t < steps, step, (0, zeros, zeros))
        tf.identity(h, name="h")
    frozen = FrozenGraph(graph.as_graph_def().SerializeToString(), {"x:0": (np.float32, (-1, steps, features))},
                         ["h:0"])
    return Graph("LSTM-TF1", frozen, (1,))


def graphs() -> list[Graph]:
    return [cnn("MobileNetV2", "mobilenet_v2"), cnn("ResNet50", "resnet50"), cnn("EfficientNetB0"), bert_encoder(),
            tf1_lstm()]


SAVED_MODEL_BATCHES = (1, 5)  # two of the daemon's shape buckets (1 and 8)


def save_small_cnn(directory: pathlib.Path) -> None:
    """A small Keras CNN (convolutions, BatchNorm, pooling, a dense head) saved with an unknown batch."""
    keras.utils.set_random_seed(7)
    x = keras.Input((32, 32, 3), name="image")
    h = keras.layers.Conv2D(32, 3, activation="relu")(x)
    h = keras.layers.BatchNormalization()(h)
    h = keras.layers.Conv2D(64, 3, strides=2, activation="relu")(h)
    h = keras.layers.GlobalAveragePooling2D()(h)
    model = keras.Model(x, keras.layers.Dense(10, name="scores")(h))
    model.export(str(directory), verbose=False)
