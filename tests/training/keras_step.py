"""A Keras classifier's training step exported as an unfrozen graph (xlacs.unfrozen) and compiled by xlacs, with the
optimizers the issue names and batches of a learnable task: tests/lower/test_ops_training.py feeds its variables
back step by step, tests/training runs it on variable states."""
import keras
import numpy as np
import tensorflow as tf

from xlacs import unfrozen

ROWS = 16
KERAS_OPTIMIZERS = {
    "SGD-momentum": lambda: keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
    "Adam": lambda: keras.optimizers.Adam(0.01),
    "Adagrad": lambda: keras.optimizers.Adagrad(0.1),
    "RMSprop": lambda: keras.optimizers.RMSprop(0.01, momentum=0.5, centered=True),
    "Ftrl": lambda: keras.optimizers.Ftrl(0.1, l1_regularization_strength=0.01),
}


def classification_batches(steps: int, rows: int = ROWS):
    """Batches of a learnable task: the label is the largest of three linear features."""
    rng = np.random.default_rng(5)
    features = rng.normal(size=(4, 3))
    xs = [rng.normal(size=(rows, 4)).astype(np.float32) for _ in range(steps)]
    return [(x, np.argmax(x @ features, axis=1).astype(np.int32)) for x in xs]


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
