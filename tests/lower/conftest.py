"""The per-op tests' daemon compiles with the options of tiered compiles' quick programs and of prepare programs
(compile/compiler.quick_options), which users' daemons run too: these tests check the lowering, which XLA's
backend options leave alone, and XLA:CPU compiles their small programs in 0.4x the time. Every other test's
daemon compiles with the defaults."""
import pytest

from tests.conftest import RunningServer
from xlacs import Client
from xlacs_server.compile.compiler import quick_options
from xlacs_server.config import Settings


@pytest.fixture(scope="session")
def server(cache_dir):
    options = tuple(f"{name}={str(value).lower()}" for name, value in quick_options({}).items())
    running = RunningServer(Settings(cache_dir=str(cache_dir), xla_options=options))
    yield running
    running.stop()


@pytest.fixture(scope="session")
def client(server):  # this directory's own: the root client is bound to the root server
    with Client(server.address, timeout=600) as c:
        yield c
