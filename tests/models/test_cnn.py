"""Frozen Keras CNNs compile through the running service and match TensorFlow."""
import pytest

from tests.models.keras_models import frozen_keras, keras_outputs
from tests.oracle import assert_close

CNNS = {name: (1, 224, 224, 3) for name in ("MobileNetV2", "ResNet50", "EfficientNetB0", "DenseNet121")}


@pytest.mark.parametrize("lower_control_flow", [True, False])
@pytest.mark.parametrize("name", sorted(CNNS))
def test_cnn_matches_tf(client, name, lower_control_flow):
    frozen, _ = frozen_keras(name, CNNS[name], lower_control_flow=lower_control_flow)
    executable = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches, name=name)
    x, want = keras_outputs(name, CNNS[name], input_seed=1)
    assert want.std() > 0.1, "re-scaled weights should keep the logits of order 1 or more"
    got, = executable(x)
    assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_weight_swapped_mobilenet_v2_hits_the_cache_with_new_results(client):
    """A fine-tuned checkpoint of a compiled architecture: same program, only the new weights are bound."""
    shape = CNNS["MobileNetV2"]
    first = None
    for seed in (0, 1):
        frozen, _ = frozen_keras("MobileNetV2", shape, seed=seed)
        executable = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches, name="MobileNetV2")
        x, want = keras_outputs("MobileNetV2", shape, seed=seed, input_seed=1)
        got, = executable(x)
        assert_close(got, want)
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
