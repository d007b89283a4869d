import pytest

from tests.conftest import RunningServer
from xlacs_server.config import Settings


@pytest.fixture
def fresh_server(tmp_path):
    """A daemon of the test's own, whose cache starts empty."""
    running = RunningServer(Settings(cache_dir=str(tmp_path / "cache")))
    yield running
    running.stop()
