"""The issue's bar (docs/training.md): a Keras classifier's tf.function training step with
optimizer.apply_gradients, exported as a graph, trains 100 steps through xlacs on a variable state, over real gRPC,
and its losses and final variables (weights, optimizer slots, the iteration count) match the same steps in
TensorFlow within float32 tolerance."""
import numpy as np
import pytest
import tensorflow as tf

from tests.training.keras_step import KERAS_OPTIMIZERS, classification_batches, keras_step


@pytest.mark.parametrize("name", KERAS_OPTIMIZERS)
def test_keras_classifier_trains_on_a_state_as_in_tensorflow(client, server, name):
    step, executable, variables = keras_step(client, KERAS_OPTIMIZERS[name]())
    initial = {n: v.numpy() for n, v in variables.items()}
    batches = classification_batches(100)
    with client.create_state(initial) as state:
        assert state.variables == {n: (a.dtype, a.shape) for n, a in initial.items()}
        assert state.nbytes == sum(a.nbytes for a in initial.values())
        losses = []
        for x, y in batches:
            outputs = executable(x, y, state=state)
            assert len(outputs) == 1  # the fetch alone: the assigned variables stay in the state
            losses.append(float(outputs[0]))
        trained = state.read()
        stats = client.stats()
        assert stats.states >= 1 and stats.state_bytes >= state.nbytes
    want_losses = [float(step(tf.constant(x), tf.constant(y))) for x, y in batches]
    np.testing.assert_allclose(losses, want_losses, rtol=1e-4, atol=1e-5)
    assert losses[-1] < 0.7 * losses[0]  # it learned
    assert trained.keys() == variables.keys()
    for n, var in variables.items():
        want = var.numpy()
        np.testing.assert_allclose(trained[n], want, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(want).max()),
                                   err_msg=var.name)
    kernel = next(n for n, a in initial.items() if a.shape == (4, 8))
    assert not np.allclose(trained[kernel], initial[kernel], atol=1e-3)
