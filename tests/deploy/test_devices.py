"""Devices: enumerated at start, pinned by --devices / XLACS_DEVICES, and a Compile naming an absent one is
FAILED_PRECONDITION listing the present ones."""
import subprocess

import grpc
import jax
import numpy as np
import pytest

from tests.deploy.daemon import double_graph, process_environment
from tests.graphs import GraphBuilder
from xlacs.cli import build_parser
from xlacs_server.config import Settings
from xlacs_server.daemon_process import DaemonProcess, free_port
from xlacs_server.errors import DeviceUnavailable, InvalidRequest
from xlacs_server.execute.devices import enumerate_devices, parse_name
from xlacs_server.main import settings_from_args


def present() -> list[str]:
    return [f"{p}:{i}" for p in ("cpu", "gpu") if _has(p) for i in range(len(jax.devices(p)))]


def _has(platform: str) -> bool:
    try:
        return bool(jax.devices(platform))
    except RuntimeError:
        return False


@pytest.mark.parametrize("name, parsed", [("cpu:0", ("cpu", 0)), ("GPU:1", ("gpu", 1)), (" gpu ", ("gpu", 0)),
                                          ("cpu:12", ("cpu", 12))])
def test_device_names_parse(name, parsed):
    assert parse_name(name) == parsed


@pytest.mark.parametrize("name", ["tpu:0", "cpu:", "cpu:x", "gpu:-1", "cuda:0", ""])
def test_malformed_device_names_are_refused_with_the_expected_form(name):
    with pytest.raises(InvalidRequest, match="cpu:N or gpu:N"):
        parse_name(name)


def test_devices_setting_comes_from_the_environment_and_the_flag_overrides_it(monkeypatch):
    assert Settings.from_env({"XLACS_DEVICES": "cpu:0, gpu:1,"}).devices == ("cpu:0", "gpu:1")
    monkeypatch.setenv("XLACS_DEVICES", "gpu:0")
    assert settings_from_args(build_parser().parse_args(["serve"])).devices == ("gpu:0",)
    assert settings_from_args(build_parser().parse_args(["serve", "--devices", "cpu:0"])).devices == ("cpu:0",)


def test_every_present_device_is_enumerated_and_pins_select_them_once():
    assert [d.name for d in enumerate_devices()] == present()
    pinned = enumerate_devices(("CPU:0", "cpu", "cpu:0"))
    assert [d.name for d in pinned] == ["cpu:0"]
    assert pinned[0].device == jax.devices("cpu")[0]


def test_pinning_an_absent_device_names_it_and_the_present_ones():
    with pytest.raises(DeviceUnavailable) as absent:
        enumerate_devices(("cpu:0", "gpu:7"))
    assert "gpu:7" in str(absent.value) and all(name in str(absent.value) for name in present())


@pytest.mark.parametrize("device", ["gpu:0", "cpu:5"])
def test_compile_on_an_absent_device_is_failed_precondition_listing_the_devices(client, device):
    if device in present():
        pytest.skip(f"{device} is present on this machine")
    graph_def, feeds, fetches = double_graph()
    with pytest.raises(grpc.RpcError) as failed:
        client.compile(graph_def, feeds, fetches, device=device)
    assert failed.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert device in failed.value.details() and all(name in failed.value.details() for name in present())
    with pytest.raises(grpc.RpcError) as checked:
        client.check(graph_def, device=device)
    assert checked.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_compile_on_a_malformed_device_is_invalid_argument(client):
    graph_def, feeds, fetches = double_graph()
    with pytest.raises(grpc.RpcError) as failed:
        client.compile(graph_def, feeds, fetches, device="tpu:0")
    assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "tpu:0" in failed.value.details()


@pytest.mark.parametrize("devices, message", [("gpu:3", "present: ['cpu:0'"), ("tpu:0", "cpu:N or gpu:N")])
def test_serve_with_an_unusable_pin_exits_with_the_reason(devices, message):
    if _has("gpu"):
        pytest.skip("the message lists this machine's GPUs too")
    env = process_environment({"XLACS_PORT": str(free_port()), "XLACS_HTTP_PORT": str(free_port()),
                               "XLACS_CACHE_DIR": ""})
    result = subprocess.run(["xlacs", "serve", "--server", "127.0.0.1:0", "--devices", devices], env=env,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 1
    assert message in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_require_gpu_comes_from_the_environment_as_a_boolean():
    assert Settings.from_env({"XLACS_REQUIRE_GPU": "1"}).require_gpu is True
    assert Settings.from_env({"XLACS_REQUIRE_GPU": "no"}).require_gpu is False
    with pytest.raises(ValueError, match="XLACS_REQUIRE_GPU='maybe' is not one of"):
        Settings.from_env({"XLACS_REQUIRE_GPU": "maybe"})


def test_requiring_a_gpu_without_one_says_so_and_what_to_do():
    if _has("gpu"):
        pytest.skip("this machine has a GPU")
    with pytest.raises(DeviceUnavailable) as absent:
        enumerate_devices(require_gpu=True)
    assert str(absent.value).startswith("no GPU: ") and "XLACS_REQUIRE_GPU=0" in str(absent.value)


def test_serve_requiring_a_gpu_without_one_exits_with_the_reason_and_no_traceback():
    if _has("gpu"):
        pytest.skip("this machine has a GPU")
    env = process_environment({"XLACS_PORT": str(free_port()), "XLACS_HTTP_PORT": str(free_port()),
                               "XLACS_CACHE_DIR": "", "XLACS_REQUIRE_GPU": "1"})
    result = subprocess.run(["xlacs", "serve", "--server", "127.0.0.1:0"], env=env, capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 1
    assert "xlacs serve: no GPU: " in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_each_device_of_a_kind_runs_its_own_loaded_program(tmp_path):
    """Two CPU devices (XLA's host device count): a program is assigned to the device it was loaded on, so the
    second device loads the cached entry for itself (a disk hit, no compile) under an id that names it, and both
    run, each on its own weights' buffers."""
    graph_def, w = weighted_graph()
    daemon = DaemonProcess(tmp_path / "serve.log", {"XLA_FLAGS": "--xla_force_host_platform_device_count=2",
                                                    "XLACS_CACHE_DIR": str(tmp_path / "cache")})
    try:
        with daemon.client() as client:
            first = client.compile(graph_def, {"x:0": (np.float32, (2, 16))}, ["y:0"], device="cpu:0")
            second = client.compile(graph_def, {"x:0": (np.float32, (2, 16))}, ["y:0"], device="cpu:1")
            assert (first.cache, second.cache) == ("miss", "disk")
            assert second.id == first.id + "@cpu:1"
            x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
            for executable in (first, second, first):
                np.testing.assert_allclose(executable(x)[0], x @ w, rtol=1e-5, atol=1e-5)
    finally:
        daemon.stop()


def weighted_graph():
    """y = x @ w with w of 64 floats, a lifted weight bound on the device."""
    w = np.random.default_rng(1).standard_normal((16, 4)).astype(np.float32)
    b = GraphBuilder()
    b.op("y", "MatMul", b.placeholder("x", (2, 16)), b.const("w", w))
    return b.graph_def, w
