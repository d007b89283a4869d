"""Random number ops, on JAX's counter-based PRNG (threefry), deterministic for a given seed.

The numbers are not TF's Philox stream; what matches TF is each op's distribution, shape and dtype, and that
a stateless op is a pure function of its seed (or key and counter). The seeded stateful ops (RandomUniform, ...)
draw from their `seed`/`seed2` attrs; with both 0, TF would pick a fresh seed per run, we derive one from the
node name, so every op still gets its own stream and an executable replays the same numbers on each run. The
tf.random.Generator ops (RngReadAndSkip, Stateful*) draw from the generator's state variable and advance it.
"""
import functools
import zlib

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlacs_server.lower import dtypes as D
from xlacs_server.lower.checks import InvalidArgument, broadcast_shape, check_rank, check_scalar
from xlacs_server.lower.context import is_constant
from xlacs_server.lower.ops.array import axes
from xlacs_server.lower.registry import register_op

UNIFORM_INT = (np.int32, np.int64, np.uint32, np.uint64)
FLOAT_NO_BF16 = (np.float16, np.float32, np.float64)
PHILOX = np.int32(1)  # TF's RNG_ALG_PHILOX, the algorithm its CPU kernels report
TRUNCATION = 2.0  # TF's truncated normals drop values more than two standard deviations out


def key_from(words):
    """A PRNG key from 64-bit words (seeds, keys, counters), constant or traced: each word's two halves."""
    words = jnp.asarray(words).astype(np.uint64).reshape(-1)
    halves = jnp.stack([(words & 0xFFFFFFFF), words >> 32], axis=-1).reshape(-1).astype(np.uint32)
    key = jax.random.wrap_key_data(halves[:2], impl="threefry2x32")
    for i in range(2, halves.shape[0]):
        key = jax.random.fold_in(key, halves[i])
    return key


def attr_key(ctx, seed: int, seed2: int):
    if seed == 0 and seed2 == 0:
        return key_from(np.array([zlib.crc32(ctx.name.encode()), 0], np.uint64))
    return key_from(np.array([seed, seed2], np.int64))


def v2_key(key, counter):
    if np.shape(key) != (1,):
        raise InvalidArgument(f"input 'key' has shape {list(np.shape(key))}; it must be [1]", input="key")
    check_rank(counter, "counter", rank=1)
    return key_from(jnp.concatenate([jnp.asarray(key).reshape(-1), jnp.asarray(counter).reshape(-1)]))


# ---- distributions: f(key, shape, dtype, *parameters) ---------------------------------------------------------

def uniform(key, shape, dtype):
    return jax.random.uniform(key, shape, dtype)  # [0, 1)


def normal(key, shape, dtype):
    return jax.random.normal(key, shape, dtype)


def truncated_normal(key, shape, dtype):
    return jax.random.truncated_normal(key, -TRUNCATION, TRUNCATION, shape, dtype)


def uniform_int(key, shape, dtype, minval, maxval):
    check_scalar(minval, "minval")
    check_scalar(maxval, "maxval")
    if is_constant(minval) and is_constant(maxval) and minval >= maxval:
        raise InvalidArgument(f"inputs 'minval' {minval} and 'maxval' {maxval} are an empty range: minval must be "
                              "smaller", input="maxval")
    return jax.random.randint(key, shape, minval, maxval, dtype)  # [minval, maxval)


def uniform_full_int(key, shape, dtype):
    unsigned = np.dtype(f"uint{np.dtype(dtype).itemsize * 8}")
    return lax.bitcast_convert_type(jax.random.bits(key, shape, unsigned), dtype)


def _categorical(key, logits, num_samples, dtype):
    check_rank(logits, "logits", rank=2)
    check_scalar(num_samples, "num_samples")
    if num_samples < 0:
        raise InvalidArgument(f"input 'num_samples' is {int(num_samples)}; it must be non-negative",
                              input="num_samples")
    num_samples = int(num_samples)
    batch = logits.shape[0]
    logits = logits.astype(np.float64 if logits.dtype == np.float64 else np.float32)
    return jax.random.categorical(key, logits[:, None, :], axis=-1, shape=(batch, num_samples)).astype(dtype)


def _shuffle(key, value):
    # Rows move whole; a scalar has nothing to shuffle.
    return jax.random.permutation(key, value, axis=0, independent=False) if value.ndim else value


def _real(rate):
    return rate if rate.dtype in (np.float32, np.float64) else rate.astype(np.float64)  # Poisson rates may be ints


def _shape(shape) -> tuple[int, ...]:
    """The shape input: a vector of non-negative sizes (or a scalar, for a scalar's empty shape)."""
    if np.ndim(shape) > 1 or np.any(shape < 0):
        raise InvalidArgument(f"input 'shape' is {shape.tolist()}; it must be a vector of non-negative sizes",
                              input="shape")
    return axes(shape) if np.ndim(shape) else ()


def _check_seed(seed):
    """A stateless op's seed input, a [2] tensor."""
    if np.shape(seed) != (2,):
        raise InvalidArgument(f"input 'seed' has shape {list(np.shape(seed))}; it must be [2]", input="seed")
    return seed


def _seed(seed):
    return key_from(_check_seed(seed))


def _per_sample(shape: tuple[int, ...], **parameters) -> tuple[int, ...]:
    """`shape`, which the stateless samplers' parameters must broadcast to, as TF's kernels require."""
    for name, value in parameters.items():
        if broadcast_shape(shape, np.shape(value), inputs=("shape", name)) != shape:
            raise InvalidArgument(f"input {name!r} has shape {list(np.shape(value))}, which does not broadcast to "
                                  f"input 'shape' {list(shape)}", input=name)
    return shape


# ---- stateless ops seeded by a [2] tensor ----------------------------------------------------------------------

def stateless(distribution, ctx, shape, seed, *, dtype, T, Tseed):
    return [distribution(_seed(seed), _shape(shape), dtype)]


for _op, _distribution in {"StatelessRandomUniform": uniform, "StatelessRandomNormal": normal,
                           "StatelessTruncatedNormal": truncated_normal}.items():
    register_op(_op, dtypes=D.FLOAT, type_attr="dtype", constant_inputs=("shape",), foldable=False)(
        functools.partial(stateless, _distribution))


@register_op("StatelessRandomUniformFullInt", dtypes=UNIFORM_INT, type_attr="dtype", constant_inputs=("shape",),
             foldable=False)
def stateless_random_uniform_full_int(ctx, shape, seed, *, dtype, T, Tseed):
    return [uniform_full_int(_seed(seed), _shape(shape), dtype)]


@register_op("StatelessRandomUniformInt", dtypes=D.INDEX, type_attr="dtype", constant_inputs=("shape",),
             foldable=False)
def stateless_random_uniform_int(ctx, shape, seed, minval, maxval, *, dtype, T, Tseed):
    return [uniform_int(_seed(seed), _shape(shape), dtype, minval, maxval)]


@register_op("StatelessMultinomial", dtypes=D.REAL, constant_inputs=("num_samples",), foldable=False)
def stateless_multinomial(ctx, logits, num_samples, seed, *, T, Tseed, output_dtype):
    return [_categorical(_seed(seed), logits, num_samples, output_dtype)]


@register_op("StatelessParameterizedTruncatedNormal", dtypes=FLOAT_NO_BF16, type_attr="dtype",
             constant_inputs=("shape",), foldable=False)
def stateless_parameterized_truncated_normal(ctx, shape, seed, means, stddevs, minvals, maxvals, *, S, Tseed, dtype):
    shape = _per_sample(_shape(shape), means=means, stddevs=stddevs, minvals=minvals, maxvals=maxvals)
    return [_parameterized_truncated_normal(_seed(seed), shape, dtype, means, stddevs, minvals, maxvals)]


def _parameterized_truncated_normal(key, shape, dtype, means, stddevs, minvals, maxvals):
    lower, upper = (minvals - means) / stddevs, (maxvals - means) / stddevs
    return (jax.random.truncated_normal(key, lower, upper, shape, dtype) * stddevs + means).astype(dtype)


@register_op("StatelessRandomGammaV2", dtypes=FLOAT_NO_BF16, type_attr="dtype", constant_inputs=("shape",),
             foldable=False)
def stateless_random_gamma_v2(ctx, shape, seed, alpha, *, dtype, T, Tseed):
    return [jax.random.gamma(_seed(seed), alpha, _per_sample(_shape(shape), alpha=alpha), dtype)]


@register_op("StatelessRandomPoisson", dtypes=FLOAT_NO_BF16 + D.INDEX, type_attr="dtype", constant_inputs=("shape",),
             foldable=False)
def stateless_random_poisson(ctx, shape, seed, lam, *, Rtype, dtype, T, Tseed):
    return [jax.random.poisson(_seed(seed), _real(lam), _per_sample(_shape(shape), lam=lam)).astype(dtype)]


@register_op("StatelessRandomBinomial", dtypes=FLOAT_NO_BF16 + D.INDEX, type_attr="dtype", constant_inputs=("shape",),
             foldable=False)
def stateless_random_binomial(ctx, shape, seed, counts, probs, *, S, Tseed, T, dtype):
    shape = _per_sample(_shape(shape), counts=counts, probs=probs)
    sample = jax.random.binomial(_seed(seed), counts.astype(np.float64), probs.astype(np.float64), shape)
    return [sample.astype(dtype)]


# ---- stateless V2 ops: a key and counter (from StatelessRandomGetKeyCounter) and an algorithm -----------------

@register_op("StatelessRandomGetKeyCounter", dtypes=D.INDEX, type_attr="Tseed")
def stateless_random_get_key_counter(ctx, seed, *, Tseed):
    seed = jnp.asarray(_check_seed(seed)).astype(np.uint64)
    return [seed[:1], jnp.stack([seed[1], jnp.zeros((), np.uint64)])]


@register_op("StatelessRandomGetKeyCounterAlg", dtypes=D.INDEX, type_attr="Tseed")
def stateless_random_get_key_counter_alg(ctx, seed, *, Tseed):
    return stateless_random_get_key_counter(ctx, seed, Tseed=Tseed) + [PHILOX]


@register_op("StatelessRandomGetAlg")
def stateless_random_get_alg(ctx):
    return [PHILOX]


def stateless_v2(distribution, ctx, shape, key, counter, alg, *, dtype, Tshape):
    # `alg` picks TF's bit generator; every value gives the same threefry stream here.
    return [distribution(v2_key(key, counter), _shape(shape), dtype)]


for _op, _distribution in {"StatelessRandomUniformV2": uniform, "StatelessRandomNormalV2": normal,
                           "StatelessTruncatedNormalV2": truncated_normal}.items():
    register_op(_op, dtypes=D.FLOAT, type_attr="dtype", constant_inputs=("shape",), foldable=False)(
        functools.partial(stateless_v2, _distribution))


@register_op("StatelessRandomUniformFullIntV2", dtypes=UNIFORM_INT, type_attr="dtype", constant_inputs=("shape",),
             foldable=False)
def stateless_random_uniform_full_int_v2(ctx, shape, key, counter, alg, *, dtype, Tshape):
    return [uniform_full_int(v2_key(key, counter), _shape(shape), dtype)]


@register_op("StatelessRandomUniformIntV2", dtypes=UNIFORM_INT, type_attr="dtype", constant_inputs=("shape",),
             foldable=False)
def stateless_random_uniform_int_v2(ctx, shape, key, counter, alg, minval, maxval, *, dtype, Tshape):
    return [uniform_int(v2_key(key, counter), _shape(shape), dtype, minval, maxval)]


@register_op("StatelessRandomGammaV3", dtypes=FLOAT_NO_BF16, type_attr="dtype", constant_inputs=("shape",),
             foldable=False)
def stateless_random_gamma_v3(ctx, shape, key, counter, alg, alpha, *, dtype, shape_dtype):
    return [jax.random.gamma(v2_key(key, counter), alpha, _per_sample(_shape(shape), alpha=alpha), dtype)]


@register_op("StatelessShuffle", dtypes=D.ALL, foldable=False)
def stateless_shuffle(ctx, value, key, counter, alg, *, T):
    return [_shuffle(v2_key(key, counter), value)]


# ---- stateful ops, seeded by their seed and seed2 attrs ---------------------------------------------------------

def stateful(distribution, ctx, shape, *, dtype, T, seed, seed2):
    return [distribution(attr_key(ctx, seed, seed2), _shape(shape), dtype)]


for _op, _distribution in {"RandomUniform": uniform, "RandomStandardNormal": normal,
                           "TruncatedNormal": truncated_normal}.items():
    register_op(_op, dtypes=D.FLOAT, type_attr="dtype", constant_inputs=("shape",), foldable=False)(
        functools.partial(stateful, _distribution))


@register_op("RandomUniformInt", dtypes=D.INDEX, type_attr="Tout", constant_inputs=("shape",), foldable=False)
def random_uniform_int(ctx, shape, minval, maxval, *, Tout, T, seed, seed2):
    return [uniform_int(attr_key(ctx, seed, seed2), _shape(shape), Tout, minval, maxval)]


@register_op("Multinomial", dtypes=D.REAL, constant_inputs=("num_samples",), foldable=False)
def multinomial(ctx, logits, num_samples, *, T, output_dtype, seed, seed2):
    return [_categorical(attr_key(ctx, seed, seed2), logits, num_samples, output_dtype)]


@register_op("RandomShuffle", dtypes=D.ALL, foldable=False)
def random_shuffle(ctx, value, *, T, seed, seed2):
    return [_shuffle(attr_key(ctx, seed, seed2), value)]


@register_op("ParameterizedTruncatedNormal", dtypes=D.FLOAT, type_attr="dtype", constant_inputs=("shape",),
             foldable=False)
def parameterized_truncated_normal(ctx, shape, means, stdevs, minvals, maxvals, *, dtype, T, seed, seed2):
    # Parameters are per batch (the first dimension of shape), or scalars.
    shape = _shape(shape)
    per_batch = [jnp.reshape(p, p.shape + (1,) * (len(shape) - 1)) if p.ndim else p
                 for p in (means, stdevs, minvals, maxvals)]
    return [_parameterized_truncated_normal(attr_key(ctx, seed, seed2), shape, dtype, *per_batch)]


@register_op("RandomGamma", dtypes=FLOAT_NO_BF16, constant_inputs=("shape",), foldable=False)
def random_gamma(ctx, shape, alpha, *, S, T, seed, seed2):
    # One sample per alpha for each index of shape: the output is shape + alpha.shape.
    return [jax.random.gamma(attr_key(ctx, seed, seed2), alpha, _shape(shape) + alpha.shape, T)]


@register_op("RandomPoissonV2", dtypes=FLOAT_NO_BF16 + D.INDEX, type_attr="dtype", constant_inputs=("shape",),
             foldable=False)
def random_poisson_v2(ctx, shape, rate, *, S, R, dtype, seed, seed2):
    return [jax.random.poisson(attr_key(ctx, seed, seed2), _real(rate), _shape(shape) + rate.shape).astype(dtype)]


# ---- tf.random.Generator: a state variable [counter words..., key] read and advanced by each draw -------------

def read_and_skip(resource, delta):
    """The generator state before this draw; the variable's counter (every word but the key) moves by delta."""
    state = resource.value
    words = lax.bitcast_convert_type(state, np.uint64)
    low = words[0] + jnp.asarray(delta).astype(np.uint64)
    words = words.at[0].set(low)
    if words.shape[0] > 2:  # Philox's 128-bit counter: carry into its high word
        words = words.at[1].add((low < lax.bitcast_convert_type(state, np.uint64)[0]).astype(np.uint64))
    resource.assign(lax.bitcast_convert_type(words, state.dtype))
    return state


@register_op("RngReadAndSkip", foldable=False)
def rng_read_and_skip(ctx, resource, alg, delta):
    return [read_and_skip(resource, delta)]


@register_op("RngSkip", foldable=False)
def rng_skip(ctx, resource, algorithm, delta):
    read_and_skip(resource, delta)
    return []


def _generator_draw(resource, shape):
    """A key from the generator's state, which then moves past the draw so that the next one differs."""
    shape = _shape(shape)
    return key_from(read_and_skip(resource, np.uint64(max(1, int(np.prod(shape, dtype=np.int64)))))), shape


def generator(distribution, ctx, resource, algorithm, shape, *, dtype, shape_dtype):
    return [distribution(*_generator_draw(resource, shape), dtype)]


for _op, _distribution in {"StatefulUniform": uniform, "StatefulStandardNormalV2": normal,
                           "StatefulTruncatedNormal": truncated_normal}.items():
    register_op(_op, dtypes=D.FLOAT, type_attr="dtype", constant_inputs=("shape",), foldable=False)(
        functools.partial(generator, _distribution))


@register_op("StatefulUniformFullInt", dtypes=UNIFORM_INT, type_attr="dtype", constant_inputs=("shape",),
             foldable=False)
def stateful_uniform_full_int(ctx, resource, algorithm, shape, *, dtype, shape_dtype):
    return [uniform_full_int(*_generator_draw(resource, shape), dtype)]


@register_op("StatefulUniformInt", dtypes=UNIFORM_INT, type_attr="dtype", constant_inputs=("shape",),
             foldable=False)
def stateful_uniform_int(ctx, resource, algorithm, shape, minval, maxval, *, dtype, shape_dtype):
    return [uniform_int(*_generator_draw(resource, shape), dtype, minval, maxval)]
