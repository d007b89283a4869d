"""`xlacs serve` as a subprocess, the way a container runs it, with helpers to wait for it and to stop it."""
from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import time

import grpc
import numpy as np

from tests.graphs import GraphBuilder
from xlacs_server.daemon_process import free_port

VENV_BIN = pathlib.Path(sys.executable).parent


def process_environment(env: dict[str, str]) -> dict[str, str]:
    """`env` on top of this process's environment, with the venv's `xlacs` first on PATH (as in the images)."""
    return {**os.environ, **env, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


class Daemon:
    """A daemon started from `argv` with `env`; gRPC and HTTP on free loopback ports; output in `log`."""

    def __init__(self, argv: list[str], env: dict[str, str], log: pathlib.Path):
        self.port, self.http_port = free_port(), free_port()
        self.env = process_environment({**env, "XLACS_HOST": "127.0.0.1", "XLACS_PORT": str(self.port),
                                         "XLACS_HTTP_PORT": str(self.http_port)})
        self.log = log
        with open(log, "w") as out:
            # A session of its own: the processes the daemon starts (execution workers) are its process group,
            # found there even after the daemon has exited.
            self.process = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        self.address = f"127.0.0.1:{self.port}"
        self.http = f"http://127.0.0.1:{self.http_port}"

    def wait_serving(self, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        with grpc.insecure_channel(self.address) as channel:
            while True:
                assert self.process.poll() is None, f"the daemon exited with {self.process.returncode}:\n{self.output}"
                ready = grpc.channel_ready_future(channel)
                try:
                    ready.result(timeout=1)
                    return
                except grpc.FutureTimeoutError:
                    # A future left waiting keeps its connectivity poller, which raises once the channel closes.
                    ready.cancel()
                    assert time.monotonic() < deadline, f"the daemon did not start:\n{self.output}"

    def wait_logged(self, text: str, timeout_s: float = 30) -> None:
        """Until the daemon's log holds `text`. Its start-up line comes once both servers have started, and a
        health check may be answered before the line is written (a CI run read the log in between)."""
        deadline = time.monotonic() + timeout_s
        while text not in self.output:
            assert self.process.poll() is None, f"the daemon exited with {self.process.returncode}:\n{self.output}"
            assert time.monotonic() < deadline, f"the daemon's log has no {text!r} after {timeout_s} s:\n{self.output}"
            time.sleep(0.1)

    def terminate(self, timeout_s: float = 120) -> int:
        """Stops the daemon, then kills what it left running, so that no test leaves a process behind."""
        if self.process.poll() is None:
            self.process.terminate()
        code = self.process.wait(timeout=timeout_s)
        with contextlib.suppress(ProcessLookupError):  # none left
            os.killpg(self.process.pid, signal.SIGKILL)
        return code

    def leftovers(self, timeout_s: float = 30) -> list[int]:
        """The processes of the exited daemon's group still running after `timeout_s`: what it started and
        left behind. Some end on their own once the daemon has gone (multiprocessing's resource tracker reads
        the end of its pipe), hence the wait."""
        assert self.process.poll() is not None, "the daemon is still running"
        deadline = time.monotonic() + timeout_s
        while (pids := self._group()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return pids

    def _group(self) -> list[int]:
        pids = []
        for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
            try:  # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
                state, _, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
            except OSError:  # ended meanwhile
                continue
            if int(group) == self.process.pid and state != "Z":  # a zombie runs nothing: its reaper is late
                pids.append(int(stat.parent.name))
        return pids

    @property
    def output(self) -> str:
        return self.log.read_text()


def double_graph():
    """y = x * 2 on float32[2, 3]: a GraphDef, its feeds and fetches."""
    b = GraphBuilder()
    b.op("y", "Mul", b.placeholder("x"), b.const("two", np.float32(2)))
    return b.graph_def, {"x:0": (np.float32, (2, 3))}, ["y:0"]
