"""An Embedding + Conv1D + GlobalMaxPool text model (int32 token input) compiles and matches TensorFlow.

The dilated Conv1D becomes SpaceToBatchND -> Conv2D -> BatchToSpaceND, the embedding a GatherV2.
"""
import keras
import numpy as np
import pytest

from tests.oracle import compile_and_compare

VOCABULARY, SEQUENCE, BATCH = 50, 12, 3


def text_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((SEQUENCE,), dtype="int32"),
        keras.layers.Embedding(VOCABULARY, 16),
        keras.layers.Conv1D(32, 3, activation="relu", padding="same"),
        keras.layers.Conv1D(16, 3, dilation_rate=2, activation="relu"),
        keras.layers.GlobalMaxPooling1D(),
        keras.layers.Dense(4),
    ])
    # Embeddings ~ N(0, 1) and kernels ~ N(0, 2/fan_in) keep the logits of order 1 (../shared/TESTING.md).
    rng = np.random.default_rng(0)
    for layer in model.layers:
        weights = layer.get_weights()
        if weights:
            scales = [1.0 if isinstance(layer, keras.layers.Embedding) else np.sqrt(2.0 / np.prod(w.shape[:-1]))
                      if w.ndim > 1 else 0.1 for w in weights]
            layer.set_weights([rng.normal(0, s, w.shape).astype(np.float32) for w, s in zip(weights, scales)])
    return model


@pytest.mark.parametrize("lower_control_flow", [True, False], ids=["lowered", "functional"])
def test_text_conv_model(client, lower_control_flow):
    model = text_model()
    tokens = np.random.default_rng(1).integers(0, VOCABULARY, size=(BATCH, SEQUENCE)).astype(np.int32)
    assert np.std(model(tokens)) > 0.1, "the logits should not be vanishingly small"
    compile_and_compare(client, lambda t: model(t), [tokens], lower_control_flow=lower_control_flow,
                        name=f"text-conv-{lower_control_flow}")
