"""Frozen Keras CNNs compile through the running service and match TensorFlow."""
import numpy as np
import pytest

from tests.models.keras_models import frozen_keras
from tests.oracle import assert_close

CNNS = {name: (1, 224, 224, 3) for name in ("MobileNetV2", "ResNet50", "EfficientNetB0", "DenseNet121")}


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


def test_weight_swapped_resnet50_hits_the_cache_with_new_results(client):
    """A fine-tuned checkpoint of a compiled architecture: same program, only the new weights are bound."""
    shape = CNNS["ResNet50"]
    x = np.random.default_rng(3).uniform(-1, 1, shape).astype(np.float32)
    first = None
    for seed in (0, 1):
        frozen, model = frozen_keras("ResNet50", shape, seed=seed)
        executable = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches, name="ResNet50")
        got, = executable(x)
        assert_close(got, model(x, training=False).numpy())
        if first is None:
            first = executable
    assert executable.cache == "l1" and executable.id != first.id
    assert executable.id.split(".")[0] == first.id.split(".")[0]  # one program, two weight bindings
    assert "compile" not in executable.stage_ms and "prepare" in executable.stage_ms  # the new weights prepared


@pytest.mark.parametrize("name", ["MobileNetV2", "ResNet50"])
def test_batch_norms_run_in_the_prepare_program(server, client, name):
    """The BatchNorm arithmetic and the kernels it scales are computed once per weight set, not per call."""
    frozen, _ = frozen_keras(name, CNNS[name])
    executable = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches, name=name)
    compiled = server.service.loaded(executable.id).executable
    assert "rsqrt" in compiled.prepare.stablehlo and "rsqrt" not in compiled.stablehlo
    assert len(compiled.prepare.call_params) < len(compiled.params) // 10  # nearly every weight is prepared
