"""The prepare split (compile/prepare.py): the weight-only part of a program runs once per weight set when weights
are bound, the per-call program takes its results, and every cache tier and execution worker keeps both parts."""
import jaxlib
import numpy as np
import pytest
import tensorflow as tf

from xlacs import dtypes
from xlacs.freeze import freeze
from xlacs_server.compile import xla_options
from xlacs_server.compile.compiler import quick_options
from xlacs_server.config import Settings
from xlacs_server.pipeline.request import CompileSpec
from xlacs_server.service import CompilationService

SHAPE = (1, 8, 8, 3)


def conv_bn(seed: int, fused: bool = False):
    """A frozen Conv2D -> BatchNorm -> Relu graph whose weights come from `seed`, and the TF function it froze."""
    rng = np.random.default_rng(seed)
    kernel = tf.constant(rng.normal(0, 0.5, (3, 3, 3, 16)), tf.float32)
    scale, offset, mean = (tf.constant(rng.normal(0, 1, 16), tf.float32) for _ in range(3))
    variance = tf.constant(rng.uniform(0.5, 1.5, 16), tf.float32)

    @tf.function
    def fn(x):
        y = tf.nn.conv2d(x, kernel, 1, "SAME")
        if fused:
            y = tf.compat.v1.nn.fused_batch_norm(y, scale, offset, mean, variance, 1e-3, is_training=False)[0]
        else:
            y = tf.nn.batch_normalization(y, mean, variance, offset, scale, 1e-3)
        return tf.nn.relu(y)
    return freeze(fn, tf.TensorSpec(SHAPE, tf.float32)), fn


def spec(frozen) -> CompileSpec:
    return CompileSpec(frozen.graph_def, [(n, dtypes.from_numpy(np.dtype(d)), tuple(s))
                                          for n, (d, s) in frozen.feeds.items()], list(frozen.fetches))


def run(service: CompilationService, frozen, x: np.ndarray):
    """(the Compile's result, the outputs of one Execute on x)."""
    result = service.compile(spec(frozen))
    return result, service.execute(result.loaded.id, {name: x for name in frozen.feeds})[1]


def settings(**overrides) -> Settings:
    return Settings(**{"cache_dir": "", **overrides})


X = np.random.default_rng(7).uniform(-1, 1, SHAPE).astype(np.float32)


def test_the_batch_norm_arithmetic_runs_in_the_prepare_program():
    frozen, fn = conv_bn(0)
    result, (got,) = run(CompilationService(settings()), frozen, X)
    executable = result.loaded.executable
    np.testing.assert_allclose(got, fn(X).numpy(), rtol=1e-5, atol=1e-5)
    assert executable.prepare is not None and "prepare" in result.stage_ms
    assert "rsqrt" in executable.prepare.stablehlo and "rsqrt" not in executable.stablehlo
    assert "convolution" not in executable.prepare.stablehlo
    assert executable.size_bytes > len(executable.prepare.serialized)  # both programs count


def test_a_new_checkpoint_is_an_l1_hit_that_prepares_its_own_weights():
    service = CompilationService(settings())
    first, (want0,) = run(service, conv_bn(0)[0], X)
    frozen1, fn1 = conv_bn(1)
    second, (got1,) = run(service, frozen1, X)
    assert (first.cache, second.cache, service.counters.compiles) == ("miss", "l1", 1)
    assert second.loaded.id != first.loaded.id and second.loaded.executable is first.loaded.executable
    np.testing.assert_allclose(got1, fn1(X).numpy(), rtol=1e-5, atol=1e-5)
    assert not np.allclose(got1, want0)
    # The first weights again: their prepared weights are held by the first binding, so they are shared.
    again, (got0,) = run(service, conv_bn(0)[0], X)
    assert again.loaded.id == first.loaded.id and again.loaded.weights[-1] is first.loaded.weights[-1]
    np.testing.assert_array_equal(got0, want0)


def test_weights_only_the_prepare_program_reads_are_not_resident():
    service = CompilationService(settings())
    result, _ = run(service, conv_bn(0)[0], X)
    executable = result.loaded.executable
    nbytes = lambda sigs: sum(s.dtype.itemsize * int(np.prod(s.shape)) for s in sigs)  # noqa: E731
    # The kernel and the four batch-norm vectors are read by the prepare program only (fold_batch_norm).
    assert len(executable.params) == 5 and executable.prepare.call_params == []
    assert service.weights.resident_bytes() == \
        nbytes(executable.params[i] for i in executable.prepare.call_params) + nbytes(executable.prepare.outputs)


def test_a_program_without_weight_only_part_is_not_split():
    w = tf.constant(np.random.default_rng(0).normal(size=(3, 16)), tf.float32)
    frozen = freeze(lambda x: tf.matmul(x, w), tf.TensorSpec((2, 3), tf.float32))
    result, _ = run(CompilationService(settings()), frozen, np.ones((2, 3), np.float32))
    assert result.loaded.executable.prepare is None and "prepare" not in result.stage_ms


def test_a_shape_of_a_weight_only_tensor_stays_a_constant_of_the_per_call_program():
    """Shape of a prepared weight is read by a Reshape that needs it as a constant: it must stay in the per-call
    program, where the shape is static."""
    w = tf.constant(np.random.default_rng(0).normal(size=(3, 16)), tf.float32)
    frozen = freeze(lambda x: tf.reshape(x, tf.raw_ops.Shape(input=tf.transpose(w * 2.0))) + 1.0,
                    tf.TensorSpec((4, 12), tf.float32))
    x = np.arange(48, dtype=np.float32).reshape(4, 12)
    result, (got,) = run(CompilationService(settings()), frozen, x)
    assert result.loaded.executable.prepare is not None
    np.testing.assert_array_equal(got, x.reshape(16, 3) + 1.0)


@pytest.mark.parametrize("tier", ["disk", "l2"])
def test_persistent_tiers_load_both_programs(tier, tmp_path, redis_server):
    options = {"cache_dir": str(tmp_path)} if tier == "disk" else \
        {"redis_url": redis_server.url, "cache_secret": "a-test-secret-of-more-than-16-bytes"}
    frozen, fn = conv_bn(0)
    first, (want,) = run(CompilationService(settings(**options)), frozen, X)
    fresh = CompilationService(settings(**options))
    hit, (got,) = run(fresh, frozen, X)
    assert (first.cache, hit.cache, fresh.counters.compiles) == ("miss", tier, 0)
    prepare = hit.loaded.executable.prepare
    assert prepare is not None and prepare.stablehlo == first.loaded.executable.prepare.stablehlo
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, fn(X).numpy(), rtol=1e-5, atol=1e-5)


def test_an_execution_worker_runs_the_per_call_program_on_prepared_weights():
    service = CompilationService(settings(isolate_executions="all"))
    try:
        frozen, fn = conv_bn(0)
        result, (got,) = run(service, frozen, X)
        assert result.loaded.executable.isolated and result.loaded.executable.prepare is not None
        np.testing.assert_allclose(got, fn(X).numpy(), rtol=1e-5, atol=1e-5)
    finally:
        service.close()


@pytest.mark.parametrize("fused", [False, True])
def test_a_folded_batch_norm_leaves_the_per_call_program_a_convolution_and_adds(fused):
    """fold_batch_norm scales the kernel by the BatchNorm's scale: that runs in the prepare program, so a call no
    longer multiplies by it."""
    frozen, fn = conv_bn(0, fused=fused)
    result, (got,) = run(CompilationService(settings()), frozen, X)
    executable = result.loaded.executable
    np.testing.assert_allclose(got, fn(X).numpy(), rtol=1e-5, atol=1e-5)
    assert executable.prepare.call_params == []  # the kernel too is read by the prepare program only
    assert "stablehlo.convolution" in executable.stablehlo
    assert "stablehlo.multiply" not in executable.stablehlo and "rsqrt" not in executable.stablehlo


def test_get_executable_reports_the_prepare_run(client):
    """Over gRPC: the Compile's stages and GetExecutable's include the prepare program's run."""
    frozen, fn = conv_bn(2)
    executable = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches)
    assert executable.stage_ms["prepare"] > 0
    info = client.executable_info(executable.id)
    assert info.stage_ms["prepare"] > 0 and "compile" in info.stage_ms
    np.testing.assert_allclose(executable(X)[0], fn(X).numpy(), rtol=1e-5, atol=1e-5)


def test_the_prepare_program_compiles_with_the_daemons_options_llvm_optimizations_and_fusion_emitters_off():
    options = {"xla_cpu_enable_fast_math": False, "xla_backend_optimization_level": 3}
    assert quick_options(options) == {"xla_cpu_enable_fast_math": False, "xla_backend_optimization_level": 0,
                                      **xla_options.elemental_emitters()}
    assert options["xla_backend_optimization_level"] == 3  # the per-call program keeps the daemon's


def test_the_elemental_emitters_are_asked_for_where_xla_has_them():
    """jaxlib 0.10's XLA:CPU has its elemental emitters (1.2-3.6x less compile time for the prepare programs of the
    Keras CNNs); 0.11's has only the fusion emitters, and refuses the option."""
    has_them = jaxlib.__version__.startswith("0.10.")
    assert xla_options.elemental_emitters() == ({"xla_cpu_use_fusion_emitters": False} if has_them else {})


def test_both_programs_compile_with_the_daemons_xla_options():
    frozen, fn = conv_bn(0)
    result, (got,) = run(CompilationService(settings(xla_options=("xla_cpu_enable_fast_math=false",))), frozen, X)
    assert result.loaded.executable.prepare is not None
    np.testing.assert_allclose(got, fn(X).numpy(), rtol=1e-5, atol=1e-5)
