"""Random ops through the service: deterministic per seed, and distributed as TF's samples of the same op.

xlacs does not reproduce TF's Philox bits, so the oracle is statistical: our samples and TF's (same op, same
shape, dtype and parameters) must agree in dtype, shape, support, mean, spread and quantiles.
"""
import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import RunningServer
from tests.lower.refusals import Fed, assert_refused_as_tf, ints
from tests.lower.test_variables import unfrozen
from tests.oracle import specs_of, traced
from xlacs import Client, freeze
from xlacs_server.config import Settings

raw = tf.raw_ops
SHAPE = (200, 100)
N = SHAPE[0] * SHAPE[1]
SEED = np.array([7, 42], np.int32)
LOGITS = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], np.float32))


@pytest.fixture(scope="module")
def default_client():
    """A daemon with the default XLA options: under this directory's quick ones (conftest.py), a program that is
    fed the seed and one that folds it may round a float64 sample's last bit differently."""
    running = RunningServer(Settings(cache_dir=""))
    with Client(running.address, timeout=600) as client:
        yield client
    running.stop()


def compiled(client, fn, args):
    frozen = freeze(traced(fn), *specs_of(args))
    executable = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches)
    return lambda *xs: executable.execute(dict(zip(frozen.feeds, xs)))


def assert_same_distribution(got, want, support=None):
    """Moments and quantiles agree within a few standard errors of a sample of this size; `support` is the
    [low, high] range that TF documents for a bounded distribution."""
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = np.asarray(got, np.float64).ravel(), np.asarray(want, np.float64).ravel()
    spread = max(w.std(), 1e-12)
    assert abs(g.mean() - w.mean()) < 6 * spread / np.sqrt(w.size), (g.mean(), w.mean())
    assert abs(g.std() / spread - 1) < 0.05, (g.std(), spread)
    quantiles = [0.05, 0.25, 0.5, 0.75, 0.95]
    step = 1 if got.dtype.kind in "iu" else 0  # integer quantiles may land on neighbouring values
    np.testing.assert_allclose(np.quantile(g, quantiles), np.quantile(w, quantiles), atol=0.1 * spread + step)
    if support is not None:
        assert support[0] <= g.min() and g.max() <= support[1], (g.min(), g.max(), support)


# TF's public stateless API (StatelessRandomGetKeyCounter + the V2 ops) and the V1 raw ops, by seed.
STATELESS = {
    "uniform": lambda s: tf.random.stateless_uniform(SHAPE, s),
    "uniform_float64": lambda s: tf.random.stateless_uniform(SHAPE, s, dtype=tf.float64),
    "uniform_float16": lambda s: tf.random.stateless_uniform(SHAPE, s, dtype=tf.float16),
    "normal": lambda s: tf.random.stateless_normal(SHAPE, s, mean=1.0, stddev=3.0),
    "truncated_normal": lambda s: tf.random.stateless_truncated_normal(SHAPE, s, dtype=tf.float64),
    "uniform_int": lambda s: tf.random.stateless_uniform(SHAPE, s, minval=-5, maxval=7, dtype=tf.int32),
    "uniform_int64": lambda s: tf.random.stateless_uniform(SHAPE, s, minval=10, maxval=10**12, dtype=tf.int64),
    "uniform_full_uint32": lambda s: tf.random.stateless_uniform(SHAPE, s, minval=None, maxval=None,
                                                                 dtype=tf.uint32),
    "uniform_full_int64": lambda s: tf.random.stateless_uniform(SHAPE, s, minval=None, maxval=None,
                                                                dtype=tf.int64),
    "gamma": lambda s: tf.random.stateless_gamma((N // 3, 3), s, alpha=[0.5, 2.0, 5.0]),
    "poisson": lambda s: tf.random.stateless_poisson(SHAPE, s, lam=3.0, dtype=tf.int32),
    "binomial": lambda s: tf.random.stateless_binomial(SHAPE, s, counts=10.0, probs=0.3),
    "parameterized_truncated_normal": lambda s: tf.random.stateless_parameterized_truncated_normal(
        SHAPE, s, means=1.0, stddevs=2.0, minvals=-1.0, maxvals=4.0),
    "v1_uniform": lambda s: raw.StatelessRandomUniform(shape=SHAPE, seed=s, dtype=tf.float32),
    "v1_normal": lambda s: raw.StatelessRandomNormal(shape=SHAPE, seed=s, dtype=tf.float64),
    "v1_truncated_normal": lambda s: raw.StatelessTruncatedNormal(shape=SHAPE, seed=s, dtype=tf.float32),
    "v1_uniform_int": lambda s: raw.StatelessRandomUniformInt(shape=SHAPE, seed=s, minval=np.int64(-3),
                                                              maxval=np.int64(4)),
    "v1_uniform_full_int": lambda s: raw.StatelessRandomUniformFullInt(shape=SHAPE, seed=s, dtype=tf.uint64),
    "v1_gamma": lambda s: raw.StatelessRandomGammaV2(shape=SHAPE, seed=s, alpha=np.float32(2.0)),
}

SUPPORT = {  # the documented ranges of the bounded distributions above (inclusive)
    **dict.fromkeys(["uniform", "uniform_float64", "uniform_float16", "v1_uniform"], (0, 1)),
    **dict.fromkeys(["truncated_normal", "v1_truncated_normal"], (-2, 2)),
    "uniform_int": (-5, 6), "uniform_int64": (10, 10**12 - 1), "v1_uniform_int": (-3, 3),
    "parameterized_truncated_normal": (-1, 4),
}


@pytest.mark.parametrize("case", sorted(STATELESS))
def test_stateless_distribution(client, case):
    fn = STATELESS[case]
    (got,) = compiled(client, fn, [SEED])(SEED)
    assert_same_distribution(got, fn(tf.constant(SEED)).numpy(), SUPPORT.get(case))


def test_stateless_categorical(client):
    fn = lambda s: tf.random.stateless_categorical(LOGITS, N, s, dtype=tf.int32)  # noqa: E731
    (got,) = compiled(client, fn, [SEED])(SEED)
    want = fn(tf.constant(SEED)).numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    for row in range(LOGITS.shape[0]):
        np.testing.assert_allclose(np.bincount(got[row], minlength=3) / N, np.bincount(want[row], minlength=3) / N,
                                   atol=0.02)


def test_stateless_shuffle_is_a_permutation(client):
    fn = lambda x, s: tf.random.experimental.stateless_shuffle(x, s)  # noqa: E731
    x = np.arange(1000, dtype=np.int64).reshape(500, 2)
    run = compiled(client, fn, [x, SEED])
    (got,) = run(x, SEED)
    assert got.shape == x.shape and (np.sort(got[:, 0]) == x[:, 0]).all()
    assert (got[:, 1] == got[:, 0] + 1).all(), "rows move whole"
    assert (got != x).any()
    assert (run(x, SEED)[0] == got).all() and (run(x, SEED + 1)[0] != got).any()


@pytest.mark.parametrize("case", ["uniform", "v1_normal", "uniform_int", "uniform_full_int64"])
def test_stateless_is_deterministic_per_seed(default_client, case):
    """Same seed: same values, in one executable and across compiles (fed or constant, int32 or int64 seed);
    another seed: other values."""
    client = default_client
    fn = STATELESS[case]
    run = compiled(client, fn, [SEED])
    (first,), (again,), (other,) = run(SEED), run(SEED), run(SEED + np.array([0, 1], np.int32))
    np.testing.assert_array_equal(first, again)
    assert np.mean(first == other) < 0.2
    (recompiled, shifted) = compiled(client, lambda s: [fn(s), fn(s) + 1], [SEED])(SEED)
    np.testing.assert_array_equal(recompiled, first)
    (constant_seed,) = compiled(client, lambda x: fn(tf.constant(SEED)), [np.zeros(1, np.float32)])(
        np.zeros(1, np.float32))
    np.testing.assert_array_equal(constant_seed, first)
    (wide_seed,) = compiled(client, fn, [SEED.astype(np.int64)])(SEED.astype(np.int64))
    np.testing.assert_array_equal(wide_seed, first)


# Stateful ops with their seed attrs set, as the seeded tf.random.* functions make them.
STATEFUL = {
    "RandomUniform": lambda seed, seed2: raw.RandomUniform(shape=SHAPE, dtype=tf.float32, seed=seed, seed2=seed2),
    "RandomStandardNormal": lambda seed, seed2: raw.RandomStandardNormal(shape=SHAPE, dtype=tf.float64, seed=seed,
                                                                         seed2=seed2),
    "TruncatedNormal": lambda seed, seed2: raw.TruncatedNormal(shape=SHAPE, dtype=tf.float32, seed=seed,
                                                               seed2=seed2),
    "RandomUniformInt": lambda seed, seed2: raw.RandomUniformInt(shape=SHAPE, minval=-4, maxval=9, seed=seed,
                                                                 seed2=seed2),
    "RandomGamma": lambda seed, seed2: raw.RandomGamma(shape=[N // 2], alpha=[1.5, 4.0], seed=seed, seed2=seed2),
    "RandomPoissonV2": lambda seed, seed2: raw.RandomPoissonV2(shape=[N // 2], rate=[1.0, 6.0], seed=seed,
                                                               seed2=seed2, dtype=tf.int64),
    "ParameterizedTruncatedNormal": lambda seed, seed2: raw.ParameterizedTruncatedNormal(
        shape=[2, N // 2], means=[0.0, 5.0], stdevs=[1.0, 2.0], minvals=[-1.0, 4.0], maxvals=[2.0, 20.0],
        seed=seed, seed2=seed2),
}


STATEFUL_SUPPORT = {"RandomUniform": (0, 1), "TruncatedNormal": (-2, 2), "RandomUniformInt": (-4, 8)}
PER_PARAMETER = {  # op -> (the axis along which its parameters vary, each parameter's support)
    "RandomGamma": (-1, [None, None]), "RandomPoissonV2": (-1, [None, None]),
    "ParameterizedTruncatedNormal": (0, [(-1, 2), (4, 20)]),
}


@pytest.mark.parametrize("op_name", sorted(STATEFUL))
def test_stateful_distribution(client, op_name):
    fn = STATEFUL[op_name]
    x = np.zeros(1, np.float32)
    (got,) = compiled(client, lambda x: fn(1, 2), [x])(x)
    want = fn(1, 2).numpy()
    if op_name not in PER_PARAMETER:
        assert_same_distribution(got, want, STATEFUL_SUPPORT.get(op_name))
        return
    axis, supports = PER_PARAMETER[op_name]
    assert got.shape == want.shape
    for g, w, support in zip(np.moveaxis(got, axis, 0), np.moveaxis(want, axis, 0), supports):
        assert_same_distribution(g, w, support)


def test_stateful_seed_attrs(client):
    """Equal seed attrs draw equal numbers (as in TF); unseeded ops get distinct streams; runs replay."""
    def fn(x):
        return [STATEFUL["RandomUniform"](3, 4), STATEFUL["RandomUniform"](3, 4), STATEFUL["RandomUniform"](3, 5),
                STATEFUL["RandomUniform"](0, 0), STATEFUL["RandomUniform"](0, 0)]
    x = np.zeros(1, np.float32)
    run = compiled(client, fn, [x])
    a, same, other_seed, unseeded, unseeded2 = run(x)
    np.testing.assert_array_equal(a, same)
    assert np.mean(a == other_seed) < 0.01 and np.mean(unseeded == unseeded2) < 0.01
    np.testing.assert_array_equal(run(x)[3], unseeded)


def test_multinomial_and_shuffle(client):
    def fn(logits, x):
        return [raw.Multinomial(logits=logits, num_samples=N, seed=5, seed2=6, output_dtype=tf.int32),
                raw.RandomShuffle(value=x, seed=5, seed2=6)]
    x = np.arange(300, dtype=np.float32).reshape(100, 3)
    samples, shuffled = compiled(client, fn, [LOGITS, x])(LOGITS, x)
    want = fn(tf.constant(LOGITS), tf.constant(x))[0].numpy()
    assert samples.dtype == want.dtype and samples.shape == want.shape
    for row in range(LOGITS.shape[0]):
        np.testing.assert_allclose(np.bincount(samples[row], minlength=3) / N,
                                   np.bincount(want[row], minlength=3) / N, atol=0.02)
    assert (np.sort(shuffled[:, 0]) == x[:, 0]).all() and (shuffled[:, 1] == shuffled[:, 0] + 1).all()
    assert (shuffled != x).any()


def test_generator(client):
    """tf.random.Generator's graph (RngReadAndSkip feeding the V2 ops) and the older Stateful* ops draw from the
    generator's state variable, which comes back advanced: the same state replays, the next one does not."""
    gen = tf.random.Generator.from_seed(3)
    alg = np.int64(gen.algorithm)

    @tf.function
    def draw():
        return [gen.normal(SHAPE), gen.uniform(SHAPE, minval=-5, maxval=7, dtype=tf.int32),
                gen.truncated_normal(SHAPE), gen.uniform(SHAPE, dtype=tf.float64),
                raw.StatefulStandardNormalV2(resource=gen.state.handle, algorithm=alg, shape=SHAPE),
                raw.StatefulUniformInt(resource=gen.state.handle, algorithm=alg, shape=SHAPE, minval=np.int64(0),
                                       maxval=np.int64(9))]
    data, feeds, fetches, variables = unfrozen(draw)
    ((name, (spec, state)),) = variables.items()
    executable = client.compile(data, {name: spec}, fetches)
    state_input = "variables/" + name.rsplit(":", 1)[0]
    start = state.numpy()
    *got, advanced = executable.execute({state_input: start})
    want = [w.numpy() for w in draw()]
    for g, w, support in zip(got, want, [None, (-5, 6), (-2, 2), (0, 1), None, (0, 8)]):
        assert_same_distribution(g, w, support)
    assert (advanced != start).any()
    *replayed, _ = executable.execute({state_input: start})
    *following, _ = executable.execute({state_input: advanced})
    for first, again, then in zip(got, replayed, following):
        np.testing.assert_array_equal(first, again)
        assert np.mean(first == then) < 0.2


# --- What TF's kernels refuse is INVALID_ARGUMENT naming the node and the input at fault ---------------------------

F32, I32, I64 = np.float32, np.int32, np.int64

# id -> (op, inputs, attrs, blamed {"input": name}, message pattern, TF refusing the same eagerly)
REFUSED = {
    "seed_of_three": ("StatelessRandomUniform", {"shape": ints(2), "seed": ints(1, 2, 3, dtype=I64)},
                      dict(dtype=F32, T=I32, Tseed=I64), {"input": "seed"}, r"must be \[2\]",
                      lambda: raw.StatelessRandomUniform(shape=[2], seed=ints(1, 2, 3, dtype=I64))),
    "negative_shape": ("RandomUniform", {"shape": ints(-2)}, dict(dtype=F32, T=I32), {"input": "shape"},
                       "non-negative sizes", lambda: raw.RandomUniform(shape=[-2], dtype=tf.float32)),
    "multinomial_of_a_vector": ("Multinomial", {"logits": Fed((2,)), "num_samples": ints(2)[0]}, dict(T=F32),
                                {"input": "logits"}, "must have rank 2",
                                lambda: raw.Multinomial(logits=[1.0, 2.0], num_samples=2)),
    "uniform_int_empty_range": ("StatelessRandomUniformInt", {"shape": ints(2), "seed": ints(1, 2, dtype=I64),
                                                              "minval": ints(5)[0], "maxval": ints(0)[0]},
                                dict(dtype=I32, T=I32, Tseed=I64), {"input": "maxval"}, "empty range",
                                lambda: raw.StatelessRandomUniformInt(shape=[2], seed=ints(1, 2, dtype=I64), minval=5,
                                                                      maxval=0)),
    "gamma_alpha_not_broadcasting": ("StatelessRandomGammaV2", {"shape": ints(2, 3), "seed": ints(1, 2, dtype=I64),
                                                                "alpha": np.array([1, 2], F32)},
                                     dict(dtype=F32, T=I32, Tseed=I64), {"input": "alpha"},
                                     r"shape \[2, 3\], alpha \[2\]",
                                     lambda: raw.StatelessRandomGammaV2(shape=[2, 3], seed=ints(1, 2, dtype=I64),
                                                                        alpha=[1.0, 2.0])),
}


@pytest.mark.parametrize("case", REFUSED, ids=str)
def test_what_tf_refuses_is_invalid_argument_naming_the_input(client, case):
    assert_refused_as_tf(client, REFUSED[case])
