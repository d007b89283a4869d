"""`xlacs serve` as a subprocess serves gRPC and the dashboard from one process and one service."""
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import httpx

from tests.dashboard.conftest import scale_graph
from xlacs import Client
from xlacs.cli import build_parser
from xlacs_server.config import Settings
from xlacs_server.main import settings_from_args

XLACS = pathlib.Path(sys.executable).with_name("xlacs")
STARTED = re.compile(r"serving gRPC on 127\.0\.0\.1:(\d+) and the dashboard on http://127\.0\.0\.1:(\d+)")


def wait_for(log: pathlib.Path, pattern: re.Pattern, process: subprocess.Popen, timeout_s: float = 120) -> re.Match:
    deadline = time.monotonic() + timeout_s
    while True:
        match = pattern.search(log.read_text())
        if match:
            return match
        assert process.poll() is None, f"xlacs serve exited with {process.returncode}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"xlacs serve did not start:\n{log.read_text()}"
        time.sleep(0.1)


def test_xlacs_serve_serves_grpc_and_http_from_one_service(tmp_path):
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        process = subprocess.Popen([str(XLACS), "serve", "--server", "127.0.0.1:0"], stdout=out,
                                   stderr=subprocess.STDOUT, env={**os.environ, "XLACS_HTTP_PORT": "0",
                                                                  "XLACS_CACHE_DIR": str(tmp_path / "cache")})
    try:
        grpc_port, http_port = map(int, wait_for(log, STARTED, process).groups())
        assert http_port not in (0, Settings().http_port)  # XLACS_HTTP_PORT=0 took a free port
        graph = scale_graph(4)
        with Client(f"127.0.0.1:{grpc_port}", timeout=120) as client, \
                httpx.Client(base_url=f"http://127.0.0.1:{http_port}", timeout=30) as http:
            assert http.get("/readyz").json() == {"status": "ready"}
            executable = graph.compile(client)
            executable.execute(graph.inputs())
            shown = http.get("/api/executables").json()["executables"]
            assert [(e["graph_name"], e["hits"]) for e in shown] == [(graph.name, 1)]
            assert http.get("/api/overview").json()["totals"]["executes"] == 1
            assert len(http.get("/api/ops").json()["ops"]) >= len(client.ops())
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, log.read_text()
    assert "stopped" in log.read_text()


def test_the_http_port_flag_overrides_the_environment(monkeypatch):
    monkeypatch.setenv("XLACS_HTTP_PORT", "9191")
    assert settings_from_args(build_parser().parse_args(["serve"])).http_port == 9191
    assert settings_from_args(build_parser().parse_args(["serve", "--http-port", "9090"])).http_port == 9090
