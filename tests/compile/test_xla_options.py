"""XLA's options are checked before they reach XLA: a bad XLA_FLAGS or xla_options stops `xlacs serve` at start
with one line naming the flag, instead of an abort; good options reach every compile."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.cache.conftest import settings
from tests.cache.test_cache_key import spec
from xlacs import dtypes
from xlacs_server.compile import xla_options
from xlacs_server.pipeline.request import CompileSpec
from xlacs_server.service import CompilationService


def serve(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "xlacs.cli", "serve", "--server", "127.0.0.1:0", "--http-port", "0"],
                          env={**os.environ, "XLACS_CACHE_DIR": "", **env}, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("flags, named", [
    ("--xla_bogus_flag=1", "Unknown flag in XLA_FLAGS: --xla_bogus_flag=1"),
    ("--xla_cpu_use_onednn=maybe", "Couldn't interpret value maybe for flag xla_cpu_use_onednn"),
])
def test_a_bad_xla_flag_stops_serve_with_a_message_not_an_abort(flags, named):
    result = serve({"XLA_FLAGS": flags})
    assert result.returncode == 1, result.stderr[-2000:]  # SystemExit with a message; XLA's abort is -6
    assert f"xlacs serve: XLA_FLAGS={flags!r} stops XLA from starting: {named}" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("options, named", [
    ("xla_cpu_no_such_option=true", "No such compile option: 'xla_cpu_no_such_option'"),
    ("xla_cpu_use_onednn=maybe", "'maybe' is not a valid bool value"),
    ("xla_cpu_use_onednn", "is not name=value"),
])
def test_bad_xla_options_stop_serve_naming_the_option(options, named):
    result = serve({"XLACS_XLA_OPTIONS": options})
    assert result.returncode == 1, result.stderr[-2000:]
    assert "xlacs serve: xla_options" in result.stderr and named in result.stderr
    assert "Traceback" not in result.stderr


def test_options_parse_to_xla_types():
    assert xla_options.parse(("xla_cpu_use_onednn=true", "--xla_backend_optimization_level=2",
                              "xla_disable_hlo_passes=fusion")) == {**xla_options.DEFAULTS,
        "xla_cpu_use_onednn": True, "xla_backend_optimization_level": 2, "xla_disable_hlo_passes": "fusion"}
    with pytest.raises(ValueError, match="sets xla_cpu_use_onednn twice"):
        xla_options.parse(("xla_cpu_use_onednn=true", "xla_cpu_use_onednn=false"))


def test_options_reach_the_compiled_program():
    """Without XLA's loop fusion pass, XLA:CPU wraps each elementwise op alone (`wrapped_multiply`)."""
    plain = CompilationService(settings()).compile(spec())
    unfused = CompilationService(settings(xla_options=("xla_disable_hlo_passes=fusion",))).compile(spec())
    assert plain.loaded.id != unfused.loaded.id  # the options are in the key
    assert "wrapped_multiply" not in plain.loaded.executable.compiled.as_text()
    assert "wrapped_multiply" in unfused.loaded.executable.compiled.as_text()


def conv_spec() -> CompileSpec:
    """y = relu(conv2d(x, w)): a 3x3 stride-2 convolution as ResNet50's downsampling ones, its kernel a lifted weight
    (a stride-1 one would become Winograd's dots, passes/winograd.py)."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [1, 56, 56, 64], name="x")
        w = tf.constant(np.random.default_rng(0).standard_normal((3, 3, 64, 64)).astype(np.float32), name="w")
        tf.nn.relu(tf.nn.conv2d(x, w, 2, "SAME"), name="y")
    return CompileSpec(g.as_graph_def().SerializeToString(), [("x:0", dtypes.parse("float32"), (1, 56, 56, 64))],
                       ["y:0"])


def test_cpu_convolutions_run_on_eigen_by_default_not_ynnpack():
    """The default xla_options turn YNNPACK off (docs/performance.md); without them XLA:CPU gives the
    convolution to YNNPACK, a `__ynn_fusion`."""
    default = CompilationService(settings()).compile(conv_spec()).loaded.executable.compiled.as_text()
    ynnpack = CompilationService(settings(xla_options=("-xla_cpu_experimental_ynn_fusion_type",))).compile(
        conv_spec()).loaded.executable.compiled.as_text()
    assert "convolution(" in default and "__ynn_fusion" not in default
    assert "__ynn_fusion" in ynnpack


def dense_spec(with_convolution: bool, dots: int = 1) -> CompileSpec:
    """y = x·w, a transformer's projection (f32[64,512]·[512,512]), `dots` of them one after the other, with or
    without a convolution before them."""
    g = tf.Graph()
    rng = np.random.default_rng(0)
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [64, 512], name="x")
        if with_convolution:
            k = tf.constant(rng.standard_normal((3, 1, 1)).astype(np.float32))
            x = tf.reshape(tf.nn.conv1d(tf.reshape(x, [64, 512, 1]), k, 1, "SAME"), [64, 512])
        for _ in range(dots):
            x = tf.matmul(x, tf.constant(rng.standard_normal((512, 512)).astype(np.float32)))
        tf.identity(x, name="y")
    return CompileSpec(g.as_graph_def().SerializeToString(), [("x:0", dtypes.parse("float32"), (64, 512))], ["y:0"])


def test_dots_of_a_program_of_more_dots_than_convolutions_run_on_ynnpack_by_default():
    """`auto` (the default) gives a program's dots to YNNPACK when it has more dots than convolutions (a transformer,
    ConvNeXt); one with as many convolutions as dots or more, or an xla_options that names the option, gets none."""
    def compiled(spec, *options):
        return CompilationService(settings(xla_options=options)).compile(spec).loaded.executable.compiled.as_text()
    assert "__ynn_fusion" in compiled(dense_spec(with_convolution=False))
    assert "__ynn_fusion" not in compiled(dense_spec(with_convolution=True))
    assert "__ynn_fusion" in compiled(dense_spec(with_convolution=True, dots=2))
    assert "__ynn_fusion" not in compiled(dense_spec(with_convolution=False), "xla_cpu_experimental_ynn_fusion_type=")
    ynn = xla_options.YNN
    assert xla_options.for_program({ynn: "auto"}, "stablehlo.dot_general %0") == {ynn: xla_options.YNN_DOTS}
    assert xla_options.for_program({ynn: "auto"}, "stablehlo.convolution stablehlo.dot_general") == {ynn: ""}
    assert xla_options.for_program({ynn: "auto"}, "stablehlo.convolution stablehlo.dot stablehlo.dot_general") == {
        ynn: xla_options.YNN_DOTS}
    assert xla_options.for_program({ynn: "auto"}, "stablehlo.add") == {ynn: ""}


def test_options_set_merge_with_the_defaults():
    """A user's option keeps the defaults, one of a default's name replaces its value, `-name` drops it."""
    compiled = CompilationService(settings(xla_options=("xla_cpu_enable_fast_math=false",))).compile(conv_spec())
    assert "__ynn_fusion" not in compiled.loaded.executable.compiled.as_text()
    ynn, width = "xla_cpu_experimental_ynn_fusion_type", "xla_cpu_prefer_vector_width"
    assert xla_options.DEFAULTS == {ynn: "auto", width: 512}
    assert xla_options.parse(()) == {ynn: "auto", width: 512}
    assert xla_options.parse(("xla_cpu_use_onednn=true",)) == {ynn: "auto", width: 512, "xla_cpu_use_onednn": True}
    assert xla_options.parse((f"{ynn}=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT", f"{width}=256")) == {
        ynn: "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT", width: 256}
    assert xla_options.parse((f"-{ynn}", "xla_cpu_use_onednn=true")) == {width: 512, "xla_cpu_use_onednn": True}
    with pytest.raises(ValueError, match="drops xla_cpu_use_onednn, which is not a default"):
        xla_options.parse(("-xla_cpu_use_onednn",))
    with pytest.raises(ValueError, match=f"sets {ynn} twice"):
        xla_options.parse((f"-{ynn}", f"{ynn}="))
    with pytest.raises(ValueError, match="is not name=value"):
        xla_options.parse(("xla_cpu_use_onednn",))


def test_xla_loops_are_vectorized_512_bits_wide_by_default(tmp_path):
    """XLA:CPU compiles each fusion for vectors of the width `xla_cpu_prefer_vector_width` asks for: 512 bits by
    default (docs/performance.md), XLA's own 256 when xla_options drops it; LLVM's attribute on the fusion's IR
    says which."""
    def widths(dump, *options):
        CompilationService(settings(xla_options=(f"xla_dump_to={dump}", *options))).compile(spec())
        ir = "".join(p.read_text() for p in dump.glob("*.ir-with-opt.ll"))
        return set(re.findall(r'"prefer-vector-width"="(\d+)"', ir))
    assert widths(tmp_path / "default") == {"512"}
    assert widths(tmp_path / "dropped", "-xla_cpu_prefer_vector_width") == {"256"}


WITHOUT_AVX512 = """
import glob, re, sys
import jax, jax.numpy as jnp
from xlacs_server.compile import xla_options
f = jax.jit(lambda x, y: jnp.clip(x * y + 1.0, 0.0, 6.0))
x = jnp.ones((64, 96), jnp.float32)
width = xla_options.DEFAULTS[xla_options.VECTOR_WIDTH]
f.lower(x, x).compile(compiler_options={"xla_dump_to": sys.argv[1], xla_options.VECTOR_WIDTH: width})
ir = "".join(open(p).read() for p in glob.glob(sys.argv[1] + "/*.ir-with-opt.ll"))
print(width, len(re.findall(r"<16 x float>", ir)), len(re.findall(r"<8 x float>", ir)))
"""


def test_a_cpu_without_avx512_gets_256_bit_vectors_from_the_default(tmp_path):
    """The 512-bit default is a preference: on a CPU without AVX-512 (XLA told so by xla_cpu_max_isa=AVX2 when the
    process starts) LLVM vectorizes the same fusion 8 floats wide, the widest that CPU has."""
    result = subprocess.run([sys.executable, "-c", WITHOUT_AVX512, str(tmp_path)], capture_output=True, text=True,
                            env={**os.environ, "XLA_FLAGS": "--xla_cpu_max_isa=AVX2"}, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    width, wide16, wide8 = map(int, result.stdout.split())
    assert width == 512 and wide16 == 0 and wide8 > 0
