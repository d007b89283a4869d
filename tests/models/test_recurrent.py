"""Keras recurrent layers (LSTM, GRU, Bidirectional LSTM) compile through the service and match
TensorFlow, frozen with lowered control flow (functionalized by xlacs) and without."""
import keras
import numpy as np
import pytest

from tests.oracle import compile_and_compare

LAYERS = {
    "LSTM": lambda: keras.layers.LSTM(4),
    "GRU": lambda: keras.layers.GRU(4, return_sequences=True),
    "BidirectionalLSTM": lambda: keras.layers.Bidirectional(keras.layers.LSTM(3, return_sequences=True)),
}
SHAPE = (2, 5, 3)  # batch, time steps, features


@pytest.mark.parametrize("lower_control_flow", [True, False], ids=["lowered", "functional"])
@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_recurrent_layer(client, layer, lower_control_flow):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input(SHAPE[1:]), LAYERS[layer]()])
    x = np.random.default_rng(1).normal(size=SHAPE).astype(np.float32)
    assert np.std(model(x)) > 0.05, "the layer's outputs should not be vanishingly small"
    compile_and_compare(client, lambda t: model(t), [x], lower_control_flow=lower_control_flow,
                        name=f"{layer}-{lower_control_flow}")
