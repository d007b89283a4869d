"""`xlacs serve` as a child process on a free loopback port, as a deployment runs it: what the tests, the
benchmarks and the load test start when they need a daemon of its own (its memory, its exit, its log)."""
from __future__ import annotations

import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time

from xlacs import Client


def free_port() -> int:
    """A loopback port free now, for a child that must be told its port (redis-server, a daemon's dashboard)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


STARTED = re.compile(r"serving gRPC on 127\.0\.0\.1:(\d+) and the dashboard on http://[^:]+:(\d+)")


def resident_bytes(pid: int) -> int:
    """The resident memory of process `pid` (Linux); 0 once it has ended."""
    try:
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return 0
    return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE).group(1)) * 1024


class DaemonProcess:
    """Started when made; `port` 0 picks a free one, which a restart (`stop()`, `start()`) keeps. `python` runs
    it: this process's interpreter, or another environment's (another jax, tests/compat)."""

    def __init__(self, log: pathlib.Path, env: dict, port: int = 0, python: str = sys.executable):
        self.log = log
        self.env = {**os.environ, "XLACS_HTTP_PORT": "0", **env}
        self.port = port
        self.python = python
        self.start()

    def start(self) -> None:
        with open(self.log, "w") as out:
            self.process = subprocess.Popen(
                [self.python, "-m", "xlacs.cli", "serve", "--server", f"127.0.0.1:{self.port}"],
                stdout=out, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + 180
        while not (match := STARTED.search(self.log.read_text())):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                raise RuntimeError(f"xlacs serve did not start:\n{self.log.read_text()}")
            time.sleep(0.05)
        self.port, self.http_port = int(match.group(1)), int(match.group(2))
        self.address = f"127.0.0.1:{self.port}"
        self.pid = self.process.pid

    def client(self, timeout: float = 600) -> Client:
        return Client(self.address, timeout=timeout)

    def rss_mib(self) -> float:
        return resident_bytes(self.pid) / 2**20

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, as an orchestrator stops a replica; kills it after `timeout`. Returns the exit code."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
