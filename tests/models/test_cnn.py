"""Frozen Keras CNNs compile through the running service and match TensorFlow."""
import numpy as np
import pytest

from tests.models.keras_models import frozen_keras
from tests.oracle import assert_close

CNNS = {"MobileNetV2": (1, 224, 224, 3), "ResNet50": (1, 224, 224, 3)}


@pytest.mark.parametrize("lower_control_flow", [True, False])
@pytest.mark.parametrize("name", sorted(CNNS))
def test_cnn_matches_tf(client, name, lower_control_flow):
    frozen, model = frozen_keras(name, CNNS[name], lower_control_flow=lower_control_flow)
    executable = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches, name=name)
    x = np.random.default_rng(1).uniform(-1, 1, CNNS[name]).astype(np.float32)
    want = model(x, training=False).numpy()
    assert want.std() > 0.1, "re-scaled weights should keep the logits of order 1 or more"
    got, = executable(x)
    assert_close(got, want, rtol=1e-4, atol=1e-5)
