"""Every dtype xlacs accepts, end to end: a TF graph with a feed and constants of that dtype goes through the
fingerprint, lowering, compile, L1, a persistent tier (a directory; Redis) reloaded by a second daemon, and
Execute over gRPC, checked against TensorFlow. Its constants cover TensorProto's typed fields (a splat and,
for half, bfloat16 and complex, a short list) and tensor_content, kept in the program or lifted to a weight."""
import numpy as np
import pytest
import tensorflow as tf

from tests.cache.conftest import settings
from tests.conftest import RunningServer
from tests.oracle import assert_close, compile_and_compare
from xlacs import Client, dtypes
from xlacs.freeze import FrozenGraph, freeze
from xlacs_server import unit
from xlacs_server.graph.fingerprint import fingerprint

LIFT_BYTES = 128  # the daemons here lift any constant this big, so that every dtype has a weight
WEIGHT_SHAPE = (32, 4)  # >= 128 bytes in every dtype; >= 16 elements, so floats are lifted anyway
DTYPES = pytest.mark.parametrize("dtype", dtypes.SUPPORTED, ids=str)
TOLERANCE = {"float16": dict(rtol=1e-3, atol=1e-3), "bfloat16": dict(rtol=1e-2, atol=1e-2)}


def values(dtype: np.dtype, shape, seed: int) -> np.ndarray:
    """Random values of `dtype` that no op here overflows: floats in [-3, 3), small integers, booleans."""
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "c":
        return (rng.uniform(-3, 3, shape) + 1j * rng.uniform(-3, 3, shape)).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -3, 4, shape).astype(dtype)
    return rng.uniform(-3, 3, shape).astype(dtype)


def model(dtype: np.dtype, kept: np.ndarray, weight: np.ndarray):
    """[x * kept + splat, x * weight] (logical ops for bool): `kept` and the splat stay in the program, the
    weight is lifted."""
    splat = kept.reshape(-1)[0].item()

    def fn(x):
        s = tf.constant(splat, tf.as_dtype(dtype), shape=kept.shape)  # one typed value, repeated by TF's rule
        k, w = tf.constant(kept), tf.constant(weight)
        if dtype == np.bool_:
            return [tf.logical_or(tf.logical_and(x, k), s), tf.math.logical_xor(x, w)]
        return [x * k + s, x * w]
    return fn


def frozen_model(dtype: np.dtype, kept_seed: int = 1, weight_seed: int = 2):
    fn = model(dtype, values(dtype, (4,), kept_seed), values(dtype, WEIGHT_SHAPE, weight_seed))
    return fn, freeze(tf.function(fn), tf.TensorSpec((4,), tf.as_dtype(dtype)))


@pytest.fixture(scope="module")
def daemons(tmp_path_factory, module_redis):
    """Per persistent tier, two daemons that share it: a directory, or a Redis."""
    directory = tmp_path_factory.mktemp("dtype-cache")
    running = {"disk": [RunningServer(settings(cache_dir=str(directory), lift_threshold_bytes=LIFT_BYTES))
                        for _ in range(2)],
               "l2": [RunningServer(settings(redis_url=module_redis.url, lift_threshold_bytes=LIFT_BYTES))
                      for _ in range(2)]}
    yield running
    for server in running["disk"] + running["l2"]:
        server.stop()


def compile_and_run(server: RunningServer, frozen: FrozenGraph, x: np.ndarray):
    with Client(server.address, timeout=600) as client:
        executable = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches, name=f"dtype_{x.dtype}")
        return executable, executable(x)


@DTYPES
@pytest.mark.parametrize("tier", ["disk", "l2"])
def test_each_dtype_compiles_caches_reloads_and_matches_tf(daemons, tier, dtype):
    fn, frozen = frozen_model(dtype)
    x = values(dtype, (4,), 0)
    want = fn(tf.constant(x))
    first, second = daemons[tier]

    compiled, got = compile_and_run(first, frozen, x)
    assert compiled.cache == "miss"
    for g, w in zip(got, want, strict=True):
        assert_close(g, w.numpy(), **TOLERANCE.get(str(dtype), {}))
    enum = dtypes.from_numpy(dtype)
    assert [s.dtype for s in [*compiled.signature.inputs, *compiled.signature.outputs]] == [enum] * 3

    again, got_again = compile_and_run(first, frozen, x)
    assert (again.cache, again.id) == ("l1", compiled.id)
    loaded, got_loaded = compile_and_run(second, frozen, x)  # a daemon that never compiled it
    assert (loaded.cache, loaded.id) == (tier, compiled.id)
    assert loaded.signature == compiled.signature
    for g, same, reloaded in zip(got, got_again, got_loaded, strict=True):
        np.testing.assert_array_equal(same, g)
        np.testing.assert_array_equal(reloaded, g)


@DTYPES
def test_kept_constant_values_enter_the_fingerprint_and_lifted_ones_only_by_dtype_and_shape(dtype):
    lifting = settings(lift_threshold_bytes=LIFT_BYTES)

    def print_of(**seeds) -> str:
        frozen = frozen_model(dtype, **seeds)[1]
        feeds = [(n, dtypes.from_numpy(d), s) for n, (d, s) in frozen.feeds.items()]
        graph = unit.build(frozen.graph_def, feeds, frozen.fetches, lifting, "cpu").graph
        assert [graph.nodes[e.node].attrs["value"].shape for e in graph.params] == [WEIGHT_SHAPE]
        return fingerprint(graph)

    base = print_of()
    assert print_of(kept_seed=3) != base
    assert print_of(weight_seed=3) == base


@DTYPES
def test_each_dtype_enters_a_function_body_as_a_constant(client, dtype):
    """A functional If whose branches take a constant of the dtype: traced bodies are keyed by their constants."""
    kept = values(dtype, (4,), 1)

    def fn(x, p):
        k = tf.constant(kept)
        if dtype == np.bool_:
            return tf.cond(p, lambda: tf.logical_and(x, k), lambda: tf.logical_or(x, k))
        return tf.cond(p, lambda: x * k, lambda: x + k)
    for p in (True, False):
        compile_and_compare(client, fn, [values(dtype, (4,), 0), np.array(p)], lower_control_flow=False,
                            **TOLERANCE.get(str(dtype), {}))
