"""A Transformer encoder block (MultiHeadAttention with a padding mask, LayerNormalization, a gelu
feed-forward) compiles through the service and matches TensorFlow."""
import keras
import numpy as np
import pytest

from tests.oracle import compile_and_compare

BATCH, SEQUENCE, WIDTH, HEADS = 2, 8, 16, 4


def encoder_block() -> keras.Model:
    keras.utils.set_random_seed(0)
    tokens = keras.Input((SEQUENCE, WIDTH))
    mask = keras.Input((SEQUENCE, SEQUENCE), dtype="bool")
    attended = keras.layers.MultiHeadAttention(HEADS, WIDTH // HEADS)(tokens, tokens, attention_mask=mask)
    x = keras.layers.LayerNormalization()(tokens + attended)
    hidden = keras.layers.Dense(4 * WIDTH, activation="gelu")(x)  # exact gelu, through Erfc
    model = keras.Model([tokens, mask], keras.layers.LayerNormalization()(x + keras.layers.Dense(WIDTH)(hidden)))
    # Keras' glorot kernels keep activations of order 1; biases and LayerNorm's beta get N(0, 0.1) and its
    # gamma U(0.8, 1.2) so that they are not the zeros and ones a wrong lowering could ignore.
    rng = np.random.default_rng(0)
    for layer in model.layers:
        layer.set_weights([w if v.path.endswith("kernel") else rng.uniform(0.8, 1.2, w.shape)
                           if v.path.endswith("gamma") else rng.normal(0, 0.1, w.shape)
                           for w, v in zip(layer.get_weights(), layer.weights)])
    return model


def padding_mask(lengths) -> np.ndarray:
    """Query i may attend to key j when j is inside the sequence's length."""
    keys = np.arange(SEQUENCE)[None, None, :] < np.asarray(lengths)[:, None, None]
    return np.broadcast_to(keys, (len(lengths), SEQUENCE, SEQUENCE)).copy()


@pytest.mark.parametrize("lower_control_flow", [True, False], ids=["lowered", "functional"])
def test_transformer_encoder_block(client, lower_control_flow):
    model = encoder_block()
    x = np.random.default_rng(1).normal(size=(BATCH, SEQUENCE, WIDTH)).astype(np.float32)
    mask = padding_mask([SEQUENCE, 5])
    assert np.std(model([x, mask])) > 0.5, "the block's outputs should be of order 1"
    compile_and_compare(client, lambda t, m: model([t, m]), [x, mask], lower_control_flow=lower_control_flow,
                        name=f"transformer-{lower_control_flow}")
