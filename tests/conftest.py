"""Shared fixtures: a real daemon on a free loopback port, a client, a real redis-server (a test fails, never
skips, when it cannot start), and TensorFlow as the oracle."""
import os
import sys
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The oracle's CPU kernels are oneDNN's on every machine: TF turns them on by itself only on some CPUs (AVX-512
# ones), and its own kernels differ (no Conv2D backprop or Conv3D dilations, and FusedBatchNorm leaves its batch
# statistics unset when not training).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from benchmarks.processes import RedisServer  # noqa: E402
from xlacs import Client  # noqa: E402
from xlacs_server.config import Settings  # noqa: E402
from xlacs_server.rpc.server import create_server  # noqa: E402
from xlacs_server.daemon import Daemon  # noqa: E402


def pytest_collection_modifyitems(items):
    """tests/stack first: under pytest-xdist its worker spends most of those minutes waiting on containers while
    the others keep the cores busy, instead of leaving them idle at the end."""
    items.sort(key=lambda item: not item.nodeid.startswith("tests/stack/"))  # stable: the rest keep their order


def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (scripts/test runs three workers), a module's tests run on one worker, so that its
    module fixtures (daemons, graphs, TensorFlow's expected outputs) are made once; tests/stack's all run on one
    worker, because they share one compose project. Modules go out in the collection's order, not xdist's
    (most tests first)."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::")[0]
            return "tests/stack" if module.startswith("tests/stack/") else module
    return ModuleScheduling(config, log)


@pytest.fixture(autouse=True)
def seeded_inputs(request):
    """tests/oracle.py's RNG restarts from a seed of the test's id before each test, so a test draws the same
    inputs whatever ran before it and a failure replays when the test runs alone."""
    oracle = sys.modules.get("tests.oracle")
    if oracle is not None:
        seed = zlib.crc32(request.node.nodeid.encode())
        oracle.RNG.bit_generator.state = np.random.default_rng(seed).bit_generator.state


class RunningServer:
    def __init__(self, settings: Settings):
        self.service = Daemon(settings)
        self.server, self.port, self.health = create_server(self.service, "127.0.0.1:0")
        self.server.start()
        self.address = f"127.0.0.1:{self.port}"

    def stop(self):
        self.server.stop(grace=None)
        self.service.close()  # its execution workers, as `xlacs serve` stops them


@pytest.fixture(scope="session", autouse=True)
def cache_dir(tmp_path_factory):
    """A fresh cache directory for the session's servers, `xlacs serve` subprocesses included (through the
    environment), and no Redis: no test sees another run's entries, and none writes to ~/.cache or ~/.config."""
    path = tmp_path_factory.mktemp("cache")
    os.environ["XLACS_CACHE_DIR"] = str(path)
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("config"))  # where the directory's secret goes
    os.environ.pop("XLACS_REDIS_URL", None)
    return path


@pytest.fixture(scope="session")
def server(cache_dir):
    running = RunningServer(Settings(cache_dir=str(cache_dir)))
    yield running
    running.stop()


@pytest.fixture(scope="session")
def client(server):
    with Client(server.address, timeout=600) as c:
        yield c


@pytest.fixture
def redis_server(tmp_path):
    """A redis-server of the test's own."""
    server = RedisServer(tmp_path)
    yield server
    server.kill()


@pytest.fixture(scope="module")
def module_redis(tmp_path_factory):
    """One redis-server for all the tests of a module."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.kill()
