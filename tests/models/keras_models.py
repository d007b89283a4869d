"""Frozen Keras models with weights re-scaled so that activations stay of order 1 (../shared/TESTING.md)."""
import functools

import numpy as np
import tensorflow as tf

from xlacs import freeze


def rescale_weights(model: tf.keras.Model, seed: int = 0) -> None:
    """Kernels ~ N(0, 2/fan_in); BatchNorm gamma ~ U(0.8,1.2), beta/mean ~ N(0,0.1), variance ~ U(0.5,1.5)."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            # gamma and beta are there unless the layer has scale=False or center=False (InceptionV3: no gamma).
            shape = layer.get_weights()[-1].shape
            layer.set_weights([rng.uniform(0.8, 1.2, shape)] * layer.scale + [rng.normal(0, 0.1, shape)] * layer.center
                              + [rng.normal(0, 0.1, shape), rng.uniform(0.5, 1.5, shape)])
            continue
        weights = []
        for w in layer.get_weights():
            if w.ndim >= 2:
                fan_in = int(np.prod(w.shape[:-1])) if not isinstance(
                    layer, tf.keras.layers.DepthwiseConv2D) else int(np.prod(w.shape[:2]))
                weights.append(rng.normal(0, np.sqrt(2.0 / fan_in), w.shape))
            else:
                weights.append(rng.normal(0, 0.1, w.shape))
        if weights:
            layer.set_weights([w.astype(np.float32) for w in weights])


@functools.lru_cache(maxsize=None)
def keras_application(name: str, input_shape: tuple, seed: int = 0) -> tf.keras.Model:
    """tf.keras.applications.<name> with weights=None, no classifier activation, and re-scaled weights."""
    tf.keras.utils.set_random_seed(seed)
    model = getattr(tf.keras.applications, name)(weights=None, input_shape=input_shape[1:],
                                                 classifier_activation=None)
    rescale_weights(model, seed)
    return model


@functools.lru_cache(maxsize=None)
def keras_function(name: str, input_shape: tuple, seed: int = 0) -> tf.types.experimental.GenericFunction:
    """The application's inference as a tf.function: one per process, so that freezing it again (with the other
    lower_control_flow) reuses its trace."""
    model = keras_application(name, input_shape, seed)
    return tf.function(lambda x: model(x, training=False))


@functools.lru_cache(maxsize=None)
def frozen_keras(name: str, input_shape: tuple, seed: int = 0, lower_control_flow: bool = True):
    """(FrozenGraph, keras model) for a Keras application, frozen with convert_variables_to_constants_v2, once per
    process (callers only read it: its GraphDef is bytes)."""
    fn = keras_function(name, input_shape, seed)
    return (freeze(fn, tf.TensorSpec(input_shape, tf.float32), lower_control_flow=lower_control_flow),
            keras_application(name, input_shape, seed))


@functools.lru_cache(maxsize=None)
def keras_outputs(name: str, input_shape: tuple, seed: int = 0, input_seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(x, the Keras application's output for x), x ~ U(-1, 1) from `input_seed`, computed once per process."""
    x = np.random.default_rng(input_seed).uniform(-1, 1, input_shape).astype(np.float32)
    return x, keras_application(name, input_shape, seed)(x, training=False).numpy()
