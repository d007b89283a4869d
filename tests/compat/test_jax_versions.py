"""The jax range the daemon supports (xlacs_server.jax_versions, pyproject.toml's server extra): the suite runs on
the oldest (.venv); here a real `xlacs serve` runs this checkout on the newest, from the venv scripts/bootstrap makes
for it (`.venv-jax-<NEWEST>`, Python 3.12: jax 0.11 needs it), and its programs match TensorFlow over gRPC."""
import subprocess
import sys
import tomllib

import numpy as np
import pytest
import tensorflow as tf

from tests.buckets.test_dynamic_batch import batch, small_cnn
from tests.deploy.files import ROOT
from tests.models.test_control_flow_graphs import while_loop, x_of
from tests.oracle import assert_close, compile_and_compare
from xlacs.freeze import freeze
from xlacs_server import jax_versions
from xlacs_server.daemon_process import DaemonProcess

NEWEST_VENV = ROOT / f".venv-jax-{jax_versions.NEWEST}"


@pytest.fixture(scope="module")
def newest(tmp_path_factory):
    """A daemon on the newest jax, running this checkout's code (PYTHONPATH before the venv's editable install)."""
    python = NEWEST_VENV / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{NEWEST_VENV} is missing: `scripts/bootstrap test` makes it")
    work = tmp_path_factory.mktemp("newest_jax")
    env = {"PYTHONPATH": f"{ROOT / 'server'}:{ROOT / 'client'}", "XLACS_CACHE_DIR": str(work / "cache")}
    daemon = DaemonProcess(work / "serve.log", env, python=str(python))
    with daemon.client() as client:
        yield client
    assert daemon.stop() == 0, daemon.log.read_text()


def test_the_daemon_runs_the_newest_jax(newest):
    """Over gRPC: a download's package names the jaxlib that compiled the program (jax is of the same version),
    and this process, on the oldest, leaves the program to the daemon rather than load it."""
    frozen = freeze(tf.function(lambda x: x * 2.0), tf.TensorSpec([2], tf.float32))
    executable = newest.compile(frozen.graph_def, frozen.feeds, frozen.fetches)
    with pytest.warns(RuntimeWarning, match=f"jaxlib_version '{jax_versions.NEWEST}' on the daemon, "
                                            f"'{jax_versions.OLDEST}' here"):
        local = executable.local()
    assert local.package.jaxlib_version == jax_versions.NEWEST and local.runs == "remote"
    assert_close(local(np.array([1.0, -2.0], np.float32))[0], np.array([2.0, -4.0], np.float32))


def test_a_cnn_of_unknown_batch_matches_tensorflow_in_each_bucket(newest):
    model = small_cnn(seed=1)
    fn = tf.function(lambda x: model(x, training=False))
    frozen = freeze(fn, tf.TensorSpec([None, 16, 16, 3], tf.float32))
    executable = newest.compile(frozen.graph_def, frozen.feeds, frozen.fetches)
    before = newest.stats().bucket_compiles
    for n in (1, 3):  # buckets 1 and 4
        x = batch(n, 16, 16, 3)
        assert_close(executable(x)[0], fn(x).numpy(), rtol=1e-4, atol=1e-4)
    assert newest.stats().bucket_compiles - before == 2


def test_a_while_loop_matches_tensorflow(newest):
    compile_and_compare(newest, while_loop, [x_of()])


def test_the_server_extra_allows_the_range():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    supported = f">={jax_versions.OLDEST},<={jax_versions.NEWEST}"
    assert {f"jax{supported}", f"jaxlib{supported}"} <= set(extras["server"])


@pytest.mark.parametrize("jax_version, jaxlib_version", [(jax_versions.OLDEST,) * 2, (jax_versions.NEWEST,) * 2])
def test_both_ends_of_the_range_are_supported(jax_version, jaxlib_version):
    jax_versions.check(jax_version, jaxlib_version)


@pytest.mark.parametrize("jax_version, jaxlib_version, says", [
    ("0.10.1", "0.10.1", "this environment has jax 0.10.1"),
    ("0.12.0", "0.12.0", "this environment has jax 0.12.0"),
    ("0.11.3.dev20260101", "0.11.3.dev20260101", "this environment has jax 0.11.3.dev20260101"),
    ("0.11.2", "0.10.2", "jax 0.11.2 and jaxlib 0.10.2"),
])
def test_another_jax_or_a_mismatched_jaxlib_is_refused_naming_the_range(jax_version, jaxlib_version, says):
    with pytest.raises(ImportError, match=f"jax {jax_versions.OLDEST} to {jax_versions.NEWEST}|jaxlib of jax") as e:
        jax_versions.check(jax_version, jaxlib_version)
    assert says in str(e.value) and f"'jax>={jax_versions.OLDEST},<={jax_versions.NEWEST}'" in str(e.value)


def test_serve_refuses_an_unsupported_jax_in_one_line():
    """`xlacs serve` where jax says it is 0.12.0: the daemon's package refuses to load, and serve says why."""
    code = "import sys, jax; jax.__version__ = '0.12.0'; from xlacs.cli import main; main(['serve'])"
    serve = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert serve.returncode == 1
    assert serve.stderr.strip() == (f"error: xlacs serve: the xlacs daemon runs on jax {jax_versions.OLDEST} to "
                                    f"{jax_versions.NEWEST}; this environment has jax 0.12.0: pip install "
                                    f"'jax>={jax_versions.OLDEST},<={jax_versions.NEWEST}' with the jaxlib of the "
                                    "same version")
