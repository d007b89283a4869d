"""The suite's language models (issue 35), Keras functional models frozen as their users freeze them: a BERT-style
encoder and a GPT-style decoder, fed int32 token ids. Their GELU is Keras' default, the exact one, which TensorFlow
computes with Erfc."""
from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from xlacs.freeze import FrozenGraph, freeze

WIDTH, HEADS, FFN = 512, 8, 2048


class PositionEmbedding(keras.layers.Layer):
    """Adds a learned vector per position, as keras_hub's PositionEmbedding does."""

    def build(self, shape):
        self.table = self.add_weight(shape=tuple(shape[1:]), initializer=keras.initializers.RandomNormal(0, 0.02))

    def call(self, x):
        return x + self.table


def _embedded(ids, vocab: int):
    """Token embedding plus position embedding, initialised as BERT's (N(0, 0.02))."""
    tokens = keras.layers.Embedding(vocab, WIDTH, embeddings_initializer=keras.initializers.RandomNormal(0, 0.02))
    return PositionEmbedding()(tokens(ids))


def _feed_forward(x):
    return keras.layers.Dense(WIDTH)(keras.layers.Dense(FFN, activation="gelu")(x))


def _attention(x, causal: bool = False):
    return keras.layers.MultiHeadAttention(HEADS, WIDTH // HEADS)(x, x, use_causal_mask=causal)


def _post_ln_layer(x):
    """BERT's layer: each sublayer's residual sum, then LayerNorm."""
    x = keras.layers.LayerNormalization(epsilon=1e-12)(x + _attention(x))
    return keras.layers.LayerNormalization(epsilon=1e-12)(x + _feed_forward(x))


def _pre_ln_layer(x):
    """GPT-2's layer: LayerNorm at each sublayer's input, the residual sum untouched; attention is causal."""
    x = x + _attention(keras.layers.LayerNormalization()(x), causal=True)
    return x + _feed_forward(keras.layers.LayerNormalization()(x))


def _frozen(model: keras.Model, batch: int, sequence: int, vocab: int) -> tuple[FrozenGraph, list[np.ndarray]]:
    """The model frozen for int32 token ids [batch, sequence], and ids drawn from the whole vocabulary."""
    frozen = freeze(tf.function(lambda ids: model(ids, training=False)),
                    tf.TensorSpec((batch, sequence), tf.int32))
    ids = np.random.default_rng(1).integers(0, vocab, (batch, sequence), dtype=np.int32)
    return frozen, [ids]


def bert_encoder(batch: int, layers: int = 4, sequence: int = 128, vocab: int = 8000):
    """Embeddings and their LayerNorm, then post-LN layers: the hidden states [batch, sequence, 512]."""
    keras.utils.set_random_seed(0)
    ids = keras.Input((sequence,), dtype="int32")
    x = keras.layers.LayerNormalization(epsilon=1e-12)(_embedded(ids, vocab))
    for _ in range(layers):
        x = _post_ln_layer(x)
    return _frozen(keras.Model(ids, x), batch, sequence, vocab)


def gpt_decoder(batch: int, layers: int = 2, sequence: int = 64, vocab: int = 4000):
    """Pre-LN causal layers, a final LayerNorm and the LM head: logits [batch, sequence, vocab]."""
    keras.utils.set_random_seed(0)
    ids = keras.Input((sequence,), dtype="int32")
    x = _embedded(ids, vocab)
    for _ in range(layers):
        x = _pre_ln_layer(x)
    logits = keras.layers.Dense(vocab)(keras.layers.LayerNormalization()(x))
    return _frozen(keras.Model(ids, logits), batch, sequence, vocab)
