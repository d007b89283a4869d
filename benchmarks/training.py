"""Training step time (issue 20, docs/training.md): a Keras classifier's tf.function step (forward, gradients,
optimizer.apply_gradients) run through xlacs on a variable state, beside the same step in TensorFlow graph mode
(tf.function) and with XLA (tf.function(jit_compile=True)), timed interleaved in one run. Each runner trains a model
of its own from the same initial weights; xlacs sends the batch and gets the loss back, the model staying on the
daemon's device. TensorFlow runs in this process, the daemon in its own.

    .venv/bin/python -m benchmarks.training [--seconds 6] [--optimizers Adam,SGD-momentum]
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import tempfile  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.peers import TF_GRAPH, TF_XLA, XLACS  # noqa: E402
from benchmarks.processes import ServeProcess  # noqa: E402
from benchmarks.timing import interleaved  # noqa: E402
from xlacs import unfrozen  # noqa: E402

FEATURES, HIDDEN, CLASSES, BATCH = 784, 512, 10, 128  # an MNIST-sized MLP: 670k weights
OPTIMIZERS = {
    "SGD-momentum": lambda: keras.optimizers.SGD(0.01, momentum=0.9),
    "Adam": lambda: keras.optimizers.Adam(1e-3),
    "Adagrad": lambda: keras.optimizers.Adagrad(0.01),
    "RMSprop": lambda: keras.optimizers.RMSprop(1e-3),
    "Ftrl": lambda: keras.optimizers.Ftrl(0.01),
}
SPECS = (tf.TensorSpec([BATCH, FEATURES], tf.float32), tf.TensorSpec([BATCH], tf.int32))


def training_step(optimizer_name: str, jit_compile: bool = False):
    """A fresh model (seeded: every runner starts from the same weights) and its step function."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(HIDDEN, activation="relu"),
                              keras.layers.Dense(HIDDEN, activation="relu"), keras.layers.Dense(CLASSES)])
    optimizer = OPTIMIZERS[optimizer_name]()
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(jit_compile=jit_compile)
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    return step


def measure_one(client, optimizer_name: str, seconds: float) -> dict:
    """p50/p99 step time of each runner, and xlacs' p50 over each TF runner's."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, FEATURES)).astype(np.float32)
    y = rng.integers(0, CLASSES, BATCH).astype(np.int32)
    graph = unfrozen(training_step(optimizer_name), *SPECS)
    executable = client.compile(graph.graph_def, graph.feeds, graph.fetches, name=f"train-{optimizer_name}")
    tf_graph, tf_xla = training_step(optimizer_name), training_step(optimizer_name, jit_compile=True)
    x_tf, y_tf = tf.constant(x), tf.constant(y)
    with client.create_state(graph.values()) as state:
        first = [float(executable(x, y, state=state)[0]), float(tf_graph(x_tf, y_tf)), float(tf_xla(x_tf, y_tf))]
        np.testing.assert_allclose(first[1:], first[0], rtol=1e-4)  # the same step from the same weights
        samples = interleaved({XLACS: lambda: executable(x, y, state=state),
                               TF_GRAPH: lambda: tf_graph(x_tf, y_tf).numpy(),
                               TF_XLA: lambda: tf_xla(x_tf, y_tf).numpy()}, seconds, min_calls=10)
        model_bytes = state.nbytes
    return {**{name: s.summary() for name, s in samples.items()}, "state_bytes": model_bytes,
            "xlacs_over_tf_graph": samples[XLACS].p50 / samples[TF_GRAPH].p50,
            "xlacs_over_tf_xla": samples[XLACS].p50 / samples[TF_XLA].p50}


def measure(client, optimizers: list[str], seconds: float) -> dict:
    return {"model": f"MLP {FEATURES}-{HIDDEN}-{HIDDEN}-{CLASSES}, batch {BATCH}",
            "by_optimizer": {name: measure_one(client, name, seconds) for name in optimizers},
            "load_average": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optimizers", default=",".join(OPTIMIZERS), help="comma-separated")
    parser.add_argument("--seconds", type=float, default=6.0, help="per optimizer, the three runners interleaved")
    args = parser.parse_args()
    server = ServeProcess(pathlib.Path(tempfile.mkdtemp(prefix="xlacs-bench-")))
    try:
        with server.client() as client:
            results = measure(client, args.optimizers.split(","), args.seconds)
    finally:
        server.stop()
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
