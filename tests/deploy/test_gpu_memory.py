"""GPU memory (settings.gpu_memory_fraction, docs/gpu.md, Memory): `xlacs serve` has JAX preallocate the setting's
share of each GPU unless the environment says how much itself, and refuses a share that is none."""
import subprocess

import pytest

from tests.deploy.daemon import process_environment
from xlacs_server.daemon_process import free_port
from xlacs_server.main import with_gpu_memory


def test_jax_preallocates_the_setting_s_share_unless_the_environment_names_one():
    environ = {}
    with_gpu_memory(0.9, environ)
    assert environ == {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.9"}
    environ = {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".3"}
    with_gpu_memory(0.9, environ)
    assert environ == {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".3"}


@pytest.mark.parametrize("fraction", [0.0, 1.5])
def test_a_share_out_of_range_is_refused_naming_the_setting(fraction):
    with pytest.raises(ValueError, match=rf"gpu_memory_fraction={fraction} .*XLACS_GPU_MEMORY_FRACTION"):
        with_gpu_memory(fraction, {})


def test_serve_with_a_share_out_of_range_exits_with_the_reason_and_no_traceback():
    env = process_environment({"XLACS_PORT": str(free_port()), "XLACS_HTTP_PORT": str(free_port()),
                               "XLACS_CACHE_DIR": "", "XLACS_GPU_MEMORY_FRACTION": "2"})
    result = subprocess.run(["xlacs", "serve", "--server", "127.0.0.1:0"], env=env, capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 1
    assert "xlacs serve: gpu_memory_fraction=2.0 is not a share" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
