"""Shared fixtures: a real daemon on a free loopback port, a client, and TensorFlow as the oracle."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from xlacs import Client  # noqa: E402
from xlacs_server.config import Settings  # noqa: E402
from xlacs_server.rpc.server import create_server  # noqa: E402
from xlacs_server.service import CompilationService  # noqa: E402


class RunningServer:
    def __init__(self, settings: Settings):
        self.service = CompilationService(settings)
        self.server, self.port, self.health = create_server(self.service, "127.0.0.1:0")
        self.server.start()
        self.address = f"127.0.0.1:{self.port}"

    def stop(self):
        self.server.stop(grace=None)


@pytest.fixture(scope="session")
def server():
    running = RunningServer(Settings())
    yield running
    running.stop()


@pytest.fixture(scope="session")
def client(server):
    with Client(server.address, timeout=600) as c:
        yield c


def assert_close(got, want, rtol=1e-4, atol=1e-5):
    """allclose relative to the output's scale (see ../shared/TESTING.md)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "fc":
        scale = max(1.0, float(np.max(np.abs(want.astype(np.complex128))))) if want.size else 1.0
        np.testing.assert_allclose(got.astype(np.complex128 if want.dtype.kind == "c" else np.float64),
                                   want.astype(np.complex128 if want.dtype.kind == "c" else np.float64),
                                   rtol=rtol, atol=atol * scale)
    else:
        np.testing.assert_array_equal(got, want)
