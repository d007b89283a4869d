"""SavedModels written by TensorFlow and Keras, and TensorFlow's own outputs for them (the oracle)."""
import atexit
import functools
import pathlib
import shutil
import tempfile

import keras
import numpy as np
import tensorflow as tf

from tests.models.keras_models import keras_application

# One directory for the session's SavedModels, removed at its end: writing MobileNetV2 takes seconds, and each is
# written once.
ROOT = pathlib.Path(tempfile.mkdtemp(prefix="xlacs-saved-models-"))
atexit.register(shutil.rmtree, ROOT, ignore_errors=True)


class Affine(tf.Module):
    """A tf.Module with two variables and two signatures, one returning a dict."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(3)
        self.w = tf.Variable(rng.normal(size=(4, 3)).astype(np.float32), name="w")
        self.b = tf.Variable(rng.normal(size=(3,)).astype(np.float32), name="b")

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def __call__(self, x):
        return {"y": tf.nn.relu(tf.matmul(x, self.w) + self.b), "total": tf.reduce_sum(x, axis=1)}

    @tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32, name="v")])
    def shift(self, v):
        return v + self.b


class Lookup(tf.Module):
    """An embedding lookup (tf.gather of a variable: ResourceGather), and a signature that assigns a variable."""

    def __init__(self):
        super().__init__()
        self.table = tf.Variable(np.random.default_rng(4).normal(size=(10, 4)).astype(np.float32), name="table")
        self.count = tf.Variable(0.0, name="count")

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.int32, name="ids")])
    def lookup(self, ids):
        return {"sum": tf.reduce_sum(tf.gather(self.table, ids), axis=1)}

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32, name="x")])
    def bump(self, x):
        self.count.assign_add(x)
        return {"count": self.count.read_value()}


class Signatures(tf.Module):
    """Three signatures of different inputs and outputs: a batch of 3 features, a batch of pairs (two inputs, int64
    and float32 out), and two fixed-shape vectors without a batch dim."""

    def __init__(self):
        super().__init__()
        self.w = tf.Variable(np.random.default_rng(6).normal(size=(3, 2)).astype(np.float32), name="w")

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def __call__(self, x):
        return {"y": tf.matmul(x, self.w)}

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="a"),
                                  tf.TensorSpec([None], tf.int64, name="k")])
    def scale(self, a, k):
        return {"scaled": a * tf.reduce_sum(self.w) * tf.cast(k, tf.float32)[:, None], "doubled": k * 2}

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32, name="left"),
                                  tf.TensorSpec([3], tf.float32, name="right")])
    def pair(self, left, right):
        return {"sum": left + right, "product": left * right}


def two_io_model() -> keras.Model:
    """A Keras model with two named inputs and a dict of two named outputs."""
    keras.utils.set_random_seed(5)
    a = keras.Input((6,), name="a")
    b = keras.Input((3,), name="b")
    hidden = keras.layers.Dense(8, activation="tanh")(keras.layers.Concatenate()([a, b]))
    return keras.Model({"a": a, "b": b}, {"score": keras.layers.Dense(2, name="score")(hidden),
                                         "embedding": keras.layers.Dense(4, name="embedding")(hidden)})


@functools.lru_cache(maxsize=None)
def saved(name: str) -> pathlib.Path:
    """The SavedModel `name`: "affine", "lookup" or "signatures" (tf.saved_model.save of a tf.Module), or
    "<model>_<saver>" with model "two_io" or "mobilenet_v2" and saver "save" (tf.saved_model.save) or "export" (Keras 3 model.export())."""
    path = ROOT / name
    if name == "affine":
        module = Affine()
        tf.saved_model.save(module, str(path), signatures={"serving_default": module.__call__, "shift": module.shift})
        return path
    if name == "signatures":
        module = Signatures()
        tf.saved_model.save(module, str(path), signatures={"serving_default": module.__call__, "scale": module.scale,
                                                           "pair": module.pair})
        return path
    if name == "lookup":
        module = Lookup()
        tf.saved_model.save(module, str(path), signatures={"serving_default": module.lookup, "bump": module.bump})
        return path
    model_name, saver = name.rsplit("_", 1)
    model = two_io_model() if model_name == "two_io" else keras_application("MobileNetV2", (1, 224, 224, 3))
    if saver == "save":
        tf.saved_model.save(model, str(path))
    else:
        model.export(str(path), verbose=False)
    return path


@functools.lru_cache(maxsize=None)
def _loaded(path: pathlib.Path):
    return tf.saved_model.load(str(path))


def tf_outputs(path: pathlib.Path, signature: str, inputs: dict) -> dict:
    """The signature's outputs as TensorFlow computes them, by name. A SavedModel of `saved` is loaded once per
    process (MobileNetV2's load takes 1.5 s), except "lookup", whose "bump" assigns its variable."""
    reused = path.parent == ROOT and path.name != "lookup"
    function = (_loaded(path) if reused else tf.saved_model.load(str(path))).signatures[signature]
    return {name: t.numpy() for name, t in function(**{n: tf.constant(a) for n, a in inputs.items()}).items()}


def random_inputs(signature, batch: int, seed: int = 0) -> dict:
    """Inputs for a signature (xlacs.saved_model.Signature), its unknown dimensions set to `batch`."""
    rng = np.random.default_rng(seed)
    shapes = {name: tuple(batch if d < 0 else d for d in spec.shape) for name, spec in signature.inputs.items()}
    return {name: rng.integers(0, 10, shapes[name]).astype(spec.dtype) if spec.dtype.kind == "i" else
            rng.uniform(-1, 1, shapes[name]).astype(spec.dtype) for name, spec in signature.inputs.items()}
