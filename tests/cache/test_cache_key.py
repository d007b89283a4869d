"""Each named ingredient of the cache key changes the key when it changes, alone; nothing outside them does,
the graph's name included."""
import dataclasses
import inspect
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import jax
import jaxlib
import numpy as np
import pytest
import tensorflow as tf

import xlacs
import xlacs_server
from tests.cache.conftest import settings
from xlacs import dtypes
from xlacs.freeze import freeze
from xlacs_server import unit, version
from xlacs_server.compile import cache_key as cache_key_module
from xlacs_server.compile.cache_key import cache_key, source_digest
from xlacs_server.lower.registry import registrations
from xlacs_server.passes.registry import pipeline
from xlacs_server.pipeline import compile_path as compile_path_module
from xlacs_server.pipeline.request import CompileSpec
from xlacs_server.service import CompilationService

INGREDIENTS = ["graph_fingerprint", "signature", "device", "runtime", "compile_options", "code", "cache_format"]
PACKAGES = {"xlacs_server": pathlib.Path(xlacs_server.__file__).parent, "xlacs": pathlib.Path(xlacs.__file__).parent}


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
    compile_unit = unit.build(request.graph_def, request.feeds, request.fetches, service.settings, device.platform)
    listed = service.compile_path.ingredients(compile_unit.graph, compile_unit.inputs, device)
    assert [name for name, _ in listed] == INGREDIENTS
    return dict(listed)


def changed(before: dict, after: dict) -> set[str]:
    """The ingredients that differ, after checking that the key differs exactly when one does."""
    names = {k for k in before if before[k] != after[k]}
    assert (cache_key(list(before.items())) != cache_key(list(after.items()))) == bool(names)
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


@pytest.mark.parametrize("module", [jax, jaxlib])
def test_the_runtime_covers_the_jax_and_jaxlib_versions(service, monkeypatch, module):
    base = ingredients(service, spec())
    monkeypatch.setattr(module, "__version__", "0.0.1")
    assert changed(base, ingredients(service, spec())) == {"runtime"}


def test_compile_options_cover_xla_options_jax_flags_and_weight_lifting(service, monkeypatch):
    base = ingredients(service, spec())
    with jax.default_matmul_precision("highest"):
        assert changed(base, ingredients(service, spec())) == {"compile_options"}
    lifting = CompilationService(settings(lift_min_float_elements=17))  # w (64 floats) is lifted still
    assert changed(base, ingredients(lifting, spec())) == {"compile_options"}
    xla = CompilationService(settings(xla_options=("xla_cpu_enable_fast_math=true",)))
    assert changed(base, ingredients(xla, spec())) == {"compile_options"}
    # The key holds the options as merged with the defaults: naming a default's own value changes nothing.
    default_named = CompilationService(settings(xla_options=("xla_cpu_experimental_ynn_fusion_type=auto",)))
    assert changed(base, ingredients(default_named, spec())) == set()
    default_dropped = CompilationService(settings(xla_options=("-xla_cpu_experimental_ynn_fusion_type",)))
    assert changed(base, ingredients(default_dropped, spec())) == {"compile_options"}

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


def test_the_code_covers_the_xlacs_version(service, monkeypatch):
    base = ingredients(service, spec())
    monkeypatch.setattr(version, "VERSION", "0.0.1")
    assert changed(base, ingredients(service, spec())) == {"code"}


def copy_of_xlacs(directory: pathlib.Path) -> dict[str, pathlib.Path]:
    """The installed packages' source copied under `directory`, as another deployment would install them."""
    ignore = shutil.ignore_patterns("__pycache__")
    return {name: pathlib.Path(shutil.copytree(path, directory / name, ignore=ignore))
            for name, path in PACKAGES.items()}


def test_the_code_covers_a_lowering_rule_a_pass_and_the_op_defs(service, monkeypatch, tmp_path):
    base = ingredients(service, spec())
    tree = copy_of_xlacs(tmp_path / "a")
    digest = source_digest(tree)
    moved = pathlib.Path(shutil.copytree(tmp_path / "a", tmp_path / "b"))
    assert source_digest({name: moved / name for name in tree}) == digest  # where it is installed does not matter
    (tree["xlacs_server"] / "dashboard" / "static" / "dashboard.css").write_text("body {}")
    (tree["xlacs_server"] / "lower" / "__pycache__").mkdir(exist_ok=True)
    (tree["xlacs_server"] / "lower" / "__pycache__" / "unary.cpython-312.pyc").write_bytes(b"stale")
    assert source_digest(tree) == digest  # only Python source and the OpList enter

    for path, rule, edited in (("lower/ops/unary.py", '"Tanh": (jnp.tanh,', '"Tanh": (jnp.sinh,'),
                               ("passes/remove_identities.py", '"Identity"', '"IdentityN"')):
        source = tree["xlacs_server"] / path
        text = source.read_text()
        assert rule in text, f"{path} no longer has {rule!r}: pick another rule to edit"
        source.write_text(text.replace(rule, edited, 1))
        monkeypatch.setattr(cache_key_module, "SOURCE_DIGEST", source_digest(tree))
        assert changed(base, ingredients(service, spec())) == {"code"}
        source.write_text(text)
    op_list = tree["xlacs_server"] / "graph" / "data" / "op_list.pb"  # TF's attr defaults, which the importer fills in
    original = op_list.read_bytes()
    op_list.write_bytes(original + b"\n\x00")  # one more OpDef, an empty one
    assert source_digest(tree) != digest
    op_list.write_bytes(original)
    assert source_digest(tree) == digest


def test_a_package_without_its_source_is_refused(tmp_path):
    (tmp_path / "xlacs_server" / "__pycache__").mkdir(parents=True)
    (tmp_path / "xlacs_server" / "__pycache__" / "__init__.cpython-312.pyc").write_bytes(b"compiled")
    with pytest.raises(RuntimeError, match="package xlacs_server in .* has no .py files"):
        source_digest({"xlacs_server": tmp_path / "xlacs_server"})


def test_the_digested_source_holds_every_registered_lowering_rule_and_pass():
    """The code ingredient covers the rules and passes this process runs: none is registered from a module
    outside the digested packages (a plugin would need its own ingredient)."""
    def inside(fn) -> bool:
        path = pathlib.Path(inspect.getsourcefile(inspect.unwrap(getattr(fn, "func", fn)))).resolve()
        return any(path.is_relative_to(root.resolve()) for root in PACKAGES.values())
    assert [l.op for l in registrations() if not inside(l.rule)] == []
    assert [p.name for p in pipeline() if not inside(p.run)] == []
    assert len(registrations()) > 300 and len(pipeline()) > 5


def compile_options_in_a_process(xla_flags: str) -> str:
    """The compile_options ingredient of a daemon started with XLA_FLAGS: XLA reads them once per process."""
    script = ("import json; from xlacs_server.compile.cache_key import compile_options_identity; "
              "from xlacs_server.execute.devices import Devices, enumerate_devices; "
              "print(json.dumps(compile_options_identity(Devices(enumerate_devices(())).resolve(''))))")
    result = subprocess.run([sys.executable, "-c", script], env={**os.environ, "XLA_FLAGS": xla_flags},
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_xla_flags_enter_through_the_compile_options_and_dump_flags_do_not(tmp_path):
    base = compile_options_in_a_process("")
    assert compile_options_in_a_process("--xla_cpu_enable_fast_math=true") != base
    assert compile_options_in_a_process(f"--xla_dump_to={tmp_path} --xla_dump_hlo_as_text") == base


def test_the_cache_format_version(service, monkeypatch):
    base = ingredients(service, spec())
    monkeypatch.setattr(compile_path_module, "CACHE_FORMAT_VERSION", compile_path_module.CACHE_FORMAT_VERSION + 1)
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


def test_the_graph_name_does_not_enter_the_key(service):
    base = ingredients(service, spec(graph_name="resnet50"))
    assert changed(base, ingredients(service, spec(graph_name="resnet 50 (v2)"))) == set()
    assert re.fullmatch("[0-9a-f]{40}", cache_key(list(base.items())))


def test_one_graph_under_three_names_compiles_once_over_grpc(client, server, tmp_path):
    """The quick start's lambda, the CLI's file name and no name: one miss, then two L1 hits of one id. The
    first name stays the executable's label."""
    def scaled(x):
        return tf.tanh(x) * 3.25 + x  # a program no other test compiles on the session's server
    fn = tf.function(lambda x: scaled(x))
    shape = tf.TensorSpec((5, 7), tf.float32)
    quick_start = client.compile_function(fn, shape)
    frozen = freeze(tf.function(scaled), shape)
    path = tmp_path / "scaled_model.pb"
    path.write_bytes(frozen.graph_def)
    (feed, (dtype, dims)), = frozen.feeds.items()
    cli = subprocess.run([sys.executable, "-m", "xlacs.cli", "compile", str(path), "--feed",
                          f"{feed}={np.dtype(dtype).name}[{','.join(map(str, dims))}]", "--fetch", frozen.fetches[0],
                          "--server", server.address, "--json"], capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr + cli.stdout
    unnamed = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches)
    from_cli = json.loads(cli.stdout)
    assert [quick_start.cache, from_cli["cache"], unnamed.cache] == ["miss", "l1", "l1"]
    assert quick_start.id == from_cli["executable_id"] == unnamed.id
    assert re.fullmatch("[0-9a-f]{40}", unnamed.id)
    assert client.executable_info(unnamed.id).graph_name == "<lambda>"
    x = np.random.default_rng(5).standard_normal((5, 7)).astype(np.float32)
    np.testing.assert_allclose(unnamed.execute([x])[0], scaled(x).numpy(), rtol=1e-6, atol=1e-6)
