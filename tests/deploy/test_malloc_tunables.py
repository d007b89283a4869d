"""glibc's malloc tunables (settings.malloc_tunables, docs/data_plane.md): `xlacs serve` re-executes itself once with
them in GLIBC_TUNABLES, keeps a tunable the environment names already, and adds none when the setting is empty."""
import os

import numpy as np
import pytest

from tests.deploy.daemon import double_graph
from xlacs_server.daemon_process import DaemonProcess
from xlacs_server.main import with_malloc_tunables


def environment(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(item.decode().split("=", 1) for item in f.read().split(b"\0") if b"=" in item)


@pytest.mark.parametrize("env, tunables, re_executed", [
    ({"GLIBC_TUNABLES": ""}, "glibc.malloc.hugetlb=1", True),  # the default, added
    ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}, "glibc.malloc.hugetlb=0", False),  # named already: kept
    # (glibc 2.36 cuts a list of two short at its colon in the environment it leaves: one tunable a case here)
])
def test_serve_runs_with_the_tunables_and_still_serves(tmp_path, env, tunables, re_executed):
    daemon = DaemonProcess(tmp_path / "serve.log", env)
    try:
        env = environment(daemon.pid)  # the same process, re-executed, with the setting then empty
        assert env.get("GLIBC_TUNABLES") == tunables
        assert env.get("XLACS_MALLOC_TUNABLES") == ("" if re_executed else None)
        with daemon.client() as client:
            x = np.arange(6, dtype=np.float32).reshape(2, 3)
            np.testing.assert_array_equal(client.compile(*double_graph())(x)[0], x * 2)
    finally:
        daemon.stop()


def test_nothing_to_add_is_no_re_execution(monkeypatch):
    # Either call re-executing would replace this test process: returning is the pass
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0")
    with_malloc_tunables("glibc.malloc.hugetlb=1")
    with_malloc_tunables("")
    monkeypatch.delenv("GLIBC_TUNABLES")
    with_malloc_tunables("")
    assert "GLIBC_TUNABLES" not in os.environ
