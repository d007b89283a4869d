"""TensorFlow as the numeric oracle: freeze a function, compile it through the service, compare outputs."""
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import meta_graph

from xlacs import freeze

RNG = np.random.default_rng(0)  # reseeded before each test from its id (tests/conftest.py, seeded_inputs)


def rand(shape, dtype=np.float32, low=-3.0, high=3.0) -> np.ndarray:
    """Random test input of any dtype: uniform floats (complex: real and imaginary parts each), integers in
    [low, high], or booleans."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in "iu":
        return RNG.integers(int(low), int(high) + 1, size=shape).astype(dtype)
    if dtype.kind == "c":
        return (RNG.uniform(low, high, size=shape) + 1j * RNG.uniform(low, high, size=shape)).astype(dtype)
    return RNG.uniform(low, high, size=shape).astype(dtype)


def ids(value) -> str:
    """A readable pytest id for dtype parameters."""
    return np.dtype(value).name if isinstance(value, type) else str(value)


def assert_close(got, want, rtol=1e-4, atol=1e-5):
    """allclose relative to the output's scale (see ../shared/TESTING.md); exact for ints and bools."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"dtype {got.dtype} != TF's {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape} != TF's {want.shape}"
    if want.dtype.kind in "fcV" or want.dtype.name == "bfloat16":
        wide = np.complex128 if want.dtype.kind == "c" else np.float64
        g, w = got.astype(wide), want.astype(wide)
        finite = np.isfinite(w)
        scale = max(1.0, float(np.max(np.abs(w[finite])))) if finite.any() else 1.0
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def specs_of(args) -> list[tf.TensorSpec]:
    return [tf.TensorSpec(np.shape(a), tf.as_dtype(np.asarray(a).dtype)) for a in args]


def traced(fn):
    """`fn` as a tf.function without AutoGraph: the tests' functions call TF's control flow ops themselves, and
    AutoGraph's conversion of a lambda parses its whole source file (about 0.25 s a test)."""
    return fn if hasattr(fn, "get_concrete_function") else tf.function(fn, autograph=False)


def compile_and_compare(client, fn, args, *, rtol=1e-4, atol=1e-5, lower_control_flow=True, name="", oracle=None):
    """Compiles `fn` for the shapes of `args` on the service, runs it, and checks it against TF eager running
    `oracle` (by default `fn` itself; another function where TF has no CPU kernel for fn's op or layout).
    Returns the Executable (so callers can check its signature or cache tier)."""
    frozen = freeze(traced(fn), *specs_of(args), lower_control_flow=lower_control_flow)
    executable = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches, name=name)
    got = executable.execute(dict(zip(frozen.feeds, args)))
    want = (oracle or fn)(*[tf.constant(a) for a in args])
    want = want if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, np.asarray(w), rtol=rtol, atol=atol)
    return executable


def strip_default_attrs(graph_def: tf.compat.v1.GraphDef) -> tf.compat.v1.GraphDef:
    """The GraphDef as TF writes it with `strip_default_attrs=True` (SavedModel's and export_meta_graph's option):
    each attr left at its OpDef's default is dropped, in the nodes and in the library's function bodies."""
    meta_graph_def = tf.compat.v1.MetaGraphDef()
    meta_graph_def.graph_def.CopyFrom(graph_def)
    meta_graph.strip_graph_default_valued_attrs(meta_graph_def)
    return meta_graph_def.graph_def
