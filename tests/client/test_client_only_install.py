"""`pip install xlacs` is the client alone: the wheel, installed into a fresh venv whose dependencies pip resolves
from the package index, holds none of the daemon's packages, compiles and runs a graph on a real daemon (started
from the test's own venv, which has the `server` extra), and `xlacs serve` there says what to install."""
import json
import shutil
import subprocess
import sys
import venv

import numpy as np
import pytest
import tensorflow as tf

from tests.deploy import files
from tests.deploy.daemon import VENV_BIN, Daemon
from tests.oracle import assert_close, rand
from xlacs.freeze import freeze
from xlacs.cli import SERVER_EXTRA

DAEMON_PACKAGES = ("jax", "jaxlib", "fastapi", "uvicorn", "redis", "starlette", "zstandard", "prometheus_client")
INSTALL_TIMEOUT_S = 600  # pip downloads grpcio, protobuf and numpy on a cold cache


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory):
    """A venv with the wheel of this checkout installed as a user would: `pip install xlacs-*.whl`."""
    work = tmp_path_factory.mktemp("client_only")
    source = work / "source"  # a copy, so that the build leaves nothing in the checkout
    for tree in ("client", "server"):
        shutil.copytree(files.ROOT / tree, source / tree, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(files.ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(work / "wheel"), str(source)], check=True, capture_output=True, timeout=INSTALL_TIMEOUT_S)
    (wheel,) = (work / "wheel").glob("xlacs-*.whl")
    venv.create(work / "venv", with_pip=True)
    bin_dir = work / "venv" / "bin"
    install = subprocess.run([bin_dir / "python", "-m", "pip", "install", "-q", str(wheel)], capture_output=True,
                             text=True, timeout=INSTALL_TIMEOUT_S)
    assert install.returncode == 0, install.stderr
    return bin_dir


def test_the_client_install_holds_none_of_the_daemons_packages(client_venv):
    probe = ("import importlib.util, json, sys; "
             "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m) is not None]))")
    found = subprocess.run([client_venv / "python", "-c", probe, *DAEMON_PACKAGES, "grpc", "numpy", "xlacs"],
                           capture_output=True, text=True, check=True).stdout
    assert json.loads(found) == ["grpc", "numpy", "xlacs"]


def test_the_client_install_compiles_and_runs_a_graph_on_a_daemon(client_venv, tmp_path):
    w, b = rand((3, 4)), rand((4,))
    frozen = freeze(tf.function(lambda x: tf.tanh(tf.matmul(x, w) + b)), tf.TensorSpec([2, 3], tf.float32))
    (tmp_path / "graph.pb").write_bytes(frozen.graph_def)
    x = rand((2, 3))
    np.save(tmp_path / "x.npy", x)
    (feed,), (fetch,) = frozen.feeds, frozen.fetches
    daemon = Daemon([str(VENV_BIN / "xlacs"), "serve"], {"XLACS_CACHE_DIR": str(tmp_path / "cache")},
                    tmp_path / "serve.log")
    try:
        daemon.wait_serving()
        run = subprocess.run([client_venv / "xlacs", "run", tmp_path / "graph.pb", "--server", daemon.address,
                              "--input", f"{feed}={tmp_path / 'x.npy'}", "--fetch", fetch, "--out",
                              tmp_path / "out", "--json", "--timeout", "300"], capture_output=True, text=True,
                             timeout=360)
    finally:
        assert daemon.terminate() == 0, daemon.output
    assert run.returncode == 0, run.stderr
    record = json.loads(run.stdout)
    assert record["cache"] and record["executable_id"]
    assert_close(np.load(record["outputs"][fetch]["path"]), tf.tanh(x @ w + b).numpy())


def test_serve_without_the_server_extra_says_what_to_install(client_venv):
    serve = subprocess.run([client_venv / "xlacs", "serve"], capture_output=True, text=True, timeout=60)
    assert serve.returncode == 1
    assert SERVER_EXTRA in serve.stderr and "Traceback" not in serve.stderr
