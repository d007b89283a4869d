"""A Keras classifier's training step exported as an unfrozen graph (xlacs.unfrozen) and compiled by xlacs: the
model, optimizers and batches tests/lower/test_ops_training.py checks op by op, here run on variable states."""
import keras
import tensorflow as tf

from tests.lower.test_ops_training import KERAS_OPTIMIZERS, classification_batches  # noqa: F401 (re-exported)
from xlacs import unfrozen

ROWS = 16


def keras_step(client, optimizer, hidden: int = 8, device: str = ""):
    """(the tf.function step, its xlacs executable, {state variable name: tf.Variable}) for a two-layer classifier
    of 4 features and 3 classes; the step returns the loss."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(hidden, activation="tanh"),
                              keras.layers.Dense(3)])
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    graph = unfrozen(step, tf.TensorSpec([ROWS, 4], tf.float32), tf.TensorSpec([ROWS], tf.int32))
    executable = client.compile(graph.graph_def, graph.feeds, graph.fetches, device=device)
    return step, executable, graph.variables
