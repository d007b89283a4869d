"""The frozen graphs of the suite: the model set, the tiny Add, the transfer graphs and the scaling families.
Every peer runs the same frozen GraphDef on the same input. A model's name ends in -b8 where it runs at batch 8."""
from __future__ import annotations

import dataclasses
import functools

import keras
import numpy as np
import tensorflow as tf

from benchmarks import language_models
from tests.models.keras_models import frozen_keras
from xlacs.freeze import FrozenGraph, freeze

MB = 1 << 20


@dataclasses.dataclass
class Model:
    name: str
    frozen: FrozenGraph
    inputs: list[np.ndarray]  # in feed order
    small: bool = False  # the service-overhead goal is about these

    def compile(self, client, wait_optimized: bool = True):
        """The xlacs Executable of this graph on `client`'s daemon, running its optimized program unless
        `wait_optimized` is off (then a cold compile of a large program answers with its quick tier)."""
        return client.compile(self.frozen.graph_def, self.frozen.feeds, self.frozen.fetches, name=self.name,
                              wait_optimized=wait_optimized)


def _inputs(frozen: FrozenGraph, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, shape).astype(dtype) for dtype, shape in frozen.feeds.values()]


def _keras_application(name: str, size: int = 224) -> Model:
    """A Keras application at batch 1 and its default input size, frozen as tests/models freezes them."""
    frozen, _ = frozen_keras(name, (1, size, size, 3))
    return Model(name, frozen, _inputs(frozen))


def _transformer_encoder() -> Model:
    """One post-norm encoder block: 4-head self-attention and a GELU feed-forward, 64 tokens of width 128."""
    keras.utils.set_random_seed(0)
    x = keras.Input((64, 128))
    h = keras.layers.LayerNormalization()(x + keras.layers.MultiHeadAttention(4, 32)(x, x))
    f = keras.layers.Dense(128)(keras.layers.Dense(512, activation="gelu")(h))
    model = keras.Model(x, keras.layers.LayerNormalization()(h + f))
    frozen = freeze(tf.function(lambda t: model(t, training=False)), tf.TensorSpec((1, 64, 128), tf.float32))
    return Model("TransformerEncoder", frozen, _inputs(frozen), small=True)


def _lstm() -> Model:
    """LSTM(128) over 32 steps of 64 features. Frozen with functional While: TF's XLA and tf2jax both fail
    graphs with TF1 control flow (Enter/Exit/Switch/Merge), which xlacs functionalizes."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((32, 64)), keras.layers.LSTM(128)])
    frozen = freeze(tf.function(lambda t: model(t, training=False)), tf.TensorSpec((1, 32, 64), tf.float32),
                    lower_control_flow=False)
    return Model("LSTM", frozen, _inputs(frozen), small=True)


def _language_model(name: str, build, batch: int) -> Model:
    return Model(name, *build(batch))


BUILDERS = {
    "MobileNetV2": functools.partial(_keras_application, "MobileNetV2"),
    "ResNet50": functools.partial(_keras_application, "ResNet50"),
    "EfficientNetB0": functools.partial(_keras_application, "EfficientNetB0"),
    "DenseNet121": functools.partial(_keras_application, "DenseNet121"),
    "InceptionV3": functools.partial(_keras_application, "InceptionV3", 299),
    "ConvNeXtTiny": functools.partial(_keras_application, "ConvNeXtTiny"),
    "TransformerEncoder": _transformer_encoder,
    "LSTM": _lstm,
    "BertEncoder": functools.partial(_language_model, "BertEncoder", language_models.bert_encoder, 1),
    "BertEncoder-b8": functools.partial(_language_model, "BertEncoder-b8", language_models.bert_encoder, 8),
    "GptDecoder": functools.partial(_language_model, "GptDecoder", language_models.gpt_decoder, 1),
    "GptDecoder-b8": functools.partial(_language_model, "GptDecoder-b8", language_models.gpt_decoder, 8),
}


def build(names: list[str]) -> list[Model]:
    return [BUILDERS[name]() for name in names]


def _frozen(fn, *specs: tf.TensorSpec) -> FrozenGraph:
    return freeze(tf.function(fn), *specs)


def tiny_add() -> Model:
    """One Add on 4 floats: what a round trip costs when the program costs nothing."""
    spec = tf.TensorSpec((4,), tf.float32)
    frozen = _frozen(lambda x, y: tf.add(x, y), spec, spec)
    return Model("Add", frozen, _inputs(frozen))


def upload(nbytes: int) -> Model:
    """A float32 input of `nbytes` and a one-element output: the request carries the bytes."""
    frozen = _frozen(lambda x: x[:1], tf.TensorSpec((nbytes // 4,), tf.float32))
    return Model(f"upload {nbytes // MB} MB", frozen, _inputs(frozen))


def download(nbytes: int) -> Model:
    """A scalar input broadcast to a float32 output of `nbytes`: the response carries the bytes."""
    frozen = _frozen(lambda s: tf.broadcast_to(s, (nbytes // 4,)), tf.TensorSpec((), tf.float32))
    return Model(f"download {nbytes // MB} MB", frozen, _inputs(frozen))


def round_trip(nbytes: int) -> Model:
    """A float32 input of `nbytes` and an output of as many (x + 1): the request and the response carry them."""
    frozen = _frozen(lambda x: x + 1.0, tf.TensorSpec((nbytes // 4,), tf.float32))
    return Model(f"in and out {nbytes // MB} MB", frozen, _inputs(frozen))


def dense_chain(layers: int, width: int = 16) -> Model:
    """`layers` tanh(x @ W + b) layers: graph size grows, weights stay small (5 nodes per layer)."""
    rng = np.random.default_rng(layers)
    weights = [(tf.constant(rng.normal(0, width ** -0.5, (width, width)).astype(np.float32)),
                tf.constant(rng.normal(0, 0.1, (width,)).astype(np.float32))) for _ in range(layers)]

    def chain(x):
        for w, b in weights:
            x = tf.tanh(tf.matmul(x, w) + b)
        return x
    frozen = _frozen(chain, tf.TensorSpec((1, width), tf.float32))
    return Model(f"chain of {layers}", frozen, _inputs(frozen))


def wide_dense(weight_bytes: int, layers: int = 4) -> Model:
    """`layers` square float32 matmuls holding `weight_bytes` in all: weights grow, the graph does not."""
    width = int((weight_bytes / 4 / layers) ** 0.5)
    rng = np.random.default_rng(width)
    weights = [tf.constant(rng.normal(0, width ** -0.5, (width, width)).astype(np.float32))
               for _ in range(layers)]

    def dense(x):
        for w in weights:
            x = tf.tanh(tf.matmul(x, w))
        return x
    frozen = _frozen(dense, tf.TensorSpec((1, width), tf.float32))
    return Model(f"{weight_bytes // MB} MB of weights", frozen, _inputs(frozen))


def node_count(frozen: FrozenGraph) -> int:
    return len(tf.compat.v1.GraphDef.FromString(frozen.graph_def).node)
