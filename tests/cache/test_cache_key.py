"""Each named ingredient of the cache key changes the key when it changes, alone; nothing outside them does."""
import dataclasses

import jax
import numpy as np
import pytest
import tensorflow as tf

from tests.cache.conftest import settings
from xlacs import dtypes
from xlacs_server import service as service_module
from xlacs_server.compile import cache_key as cache_key_module
from xlacs_server.compile.cache_key import cache_key
from xlacs_server.passes import registry as pass_registry
from xlacs_server.service import CompilationService, CompileSpec

INGREDIENTS = ["graph_fingerprint", "signature", "device", "runtime", "compile_options", "pass_pipeline",
               "cache_format"]


def spec(scale=2.0, weight_seed=0, names=("x", "w", "y"), rows=2, graph_name="model") -> CompileSpec:
    """y = (x @ w) * scale: `w` has 64 floats (a lifted weight), `scale` stays in the program."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [rows, 16], name=names[0])
        w = tf.constant(np.random.default_rng(weight_seed).standard_normal((16, 4)).astype(np.float32), name=names[1])
        tf.identity(tf.matmul(x, w) * scale, name=names[2])
    return CompileSpec(g.as_graph_def().SerializeToString(), [(f"{names[0]}:0", dtypes.parse("float32"), (rows, 16))],
                       [f"{names[2]}:0"], graph_name=graph_name)


@pytest.fixture(scope="module")
def service():
    return CompilationService(settings())


def ingredients(service, request: CompileSpec, device=None) -> dict[str, str]:
    device = device or service.devices.resolve("")
    graph, inputs = service.compile_unit(request, device)
    listed = service.ingredients(graph, inputs, device)
    assert [name for name, _ in listed] == INGREDIENTS
    return dict(listed)


def changed(before: dict, after: dict) -> set[str]:
    """The ingredients that differ, after checking that the key differs exactly when one does."""
    names = {k for k in before if before[k] != after[k]}
    assert (cache_key("m", list(before.items())) != cache_key("m", list(after.items()))) == bool(names)
    return names


def test_the_graph_fingerprint_covers_ops_and_the_constants_kept_in_the_program(service):
    base = ingredients(service, spec())
    assert changed(base, ingredients(service, spec(scale=3.0))) == {"graph_fingerprint"}


def test_the_signature_covers_feed_shapes(service):
    assert changed(ingredients(service, spec()), ingredients(service, spec(rows=3))) == {"signature"}


def test_the_device_covers_its_kind_and_the_host_instruction_set(service, monkeypatch):
    base = ingredients(service, spec())
    device = service.devices.resolve("")
    assert changed(base, ingredients(service, spec(), dataclasses.replace(device, kind="other kind"))) == {"device"}
    monkeypatch.setattr(cache_key_module, "host_isa", lambda: "riscv64/0000")
    assert changed(base, ingredients(service, spec())) == {"device"}


def test_the_runtime_covers_the_jax_version(service, monkeypatch):
    base = ingredients(service, spec())
    monkeypatch.setattr(jax, "__version__", "0.0.1")
    assert changed(base, ingredients(service, spec())) == {"runtime"}


def test_compile_options_cover_xla_options_jax_flags_and_weight_lifting(service, monkeypatch):
    base = ingredients(service, spec())
    with jax.default_matmul_precision("highest"):
        assert changed(base, ingredients(service, spec())) == {"compile_options"}
    lifting = CompilationService(settings(lift_min_float_elements=17))  # w (64 floats) is lifted still
    assert changed(base, ingredients(lifting, spec())) == {"compile_options"}

    def options(set_option):
        def patched(*args, **kwargs):
            options = compile_options(*args, **kwargs)
            set_option(options.executable_build_options.debug_options)
            return options
        return patched
    compile_options = cache_key_module.compile_options
    monkeypatch.setattr(cache_key_module, "compile_options",
                        options(lambda debug: setattr(debug, "xla_cpu_enable_fast_math", True)))
    assert changed(base, ingredients(service, spec())) == {"compile_options"}  # as XLA_FLAGS would set it
    monkeypatch.setattr(cache_key_module, "compile_options",
                        options(lambda debug: setattr(debug, "xla_dump_to", "/tmp/dumps")))
    assert changed(base, ingredients(service, spec())) == set()  # dumping does not change the executable


def test_the_pass_pipeline_version(service, monkeypatch):
    base = ingredients(service, spec())
    monkeypatch.setattr(pass_registry, "PIPELINE_VERSION", pass_registry.PIPELINE_VERSION + 1)
    assert changed(base, ingredients(service, spec())) == {"pass_pipeline"}


def test_the_cache_format_version(service, monkeypatch):
    base = ingredients(service, spec())
    monkeypatch.setattr(service_module, "CACHE_FORMAT_VERSION", service_module.CACHE_FORMAT_VERSION + 1)
    assert changed(base, ingredients(service, spec())) == {"cache_format"}


def test_names_weight_values_device_index_and_cache_settings_do_not_enter_the_key(service):
    base = ingredients(service, spec())
    assert changed(base, ingredients(service, spec(names=("input", "kernel", "logits")))) == set()
    assert changed(base, ingredients(service, spec(weight_seed=1))) == set()
    device = dataclasses.replace(service.devices.resolve(""), name="cpu:7")
    assert changed(base, ingredients(service, spec(), device)) == set()
    other = CompilationService(settings(cache_secret="x" * 32, cache_key_prefix="team-b:", cache_ttl_s=60,
                                        cache_max_entry_bytes=1 << 20, cache_lease_s=1.0))
    assert changed(base, ingredients(other, spec())) == set()


def test_the_graph_name_is_the_readable_prefix_only(service):
    a = cache_key("resnet50", list(ingredients(service, spec()).items()))
    b = cache_key("resnet 50 (v2)", list(ingredients(service, spec()).items()))
    assert a.startswith("resnet50-") and b.startswith("resnet_50_v2_-")
    assert a.split("-")[1] == b.split("-")[1]
