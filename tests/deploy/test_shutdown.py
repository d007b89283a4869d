"""SIGTERM on `xlacs serve`: readiness turns false (gRPC health NOT_SERVING, /readyz 503), new calls are
refused, the calls in flight finish within XLACS_SHUTDOWN_GRACE_S, and the daemon exits 0; calls still running
then are cancelled, and the daemon exits 0 all the same, leaving no process behind."""
import signal
import threading
import time

import grpc
import httpx
import numpy as np
import pytest
import tensorflow as tf
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from tests.deploy.daemon import Daemon
from tests.rpc.test_runaway import bounded, endless
from xlacs import Client
from xlacs.cli import COMPILER_SERVICE
from xlacs.v1 import xlacs_pb2, xlacs_pb2_grpc

SIZE = 1024
ITERATIONS = 300  # seconds of MatMuls on this machine's CPU: long enough to signal mid-call and see the drain


def matmul_loop(x, w):
    """y <- tanh(y @ w + x), ITERATIONS times: a contraction (|w| < 1), so rounding differences do not grow."""
    _, y = tf.while_loop(lambda i, y: i < ITERATIONS, lambda i, y: (i + 1, tf.tanh(tf.matmul(y, w) + x)),
                         (tf.constant(0), x))
    return y


def inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((SIZE, SIZE), dtype=np.float32)
    w = (rng.standard_normal((SIZE, SIZE)) * 0.4 / np.sqrt(SIZE)).astype(np.float32)
    return x, w


def start(tmp_path, grace_s: float, **env: str) -> Daemon:
    daemon = Daemon(["xlacs", "serve"], {"XLACS_SHUTDOWN_GRACE_S": str(grace_s), "XLACS_CACHE_DIR": "", **env},
                    tmp_path / "serve.log")
    daemon.wait_serving()
    return daemon


def compile_loop(client: Client):
    spec = tf.TensorSpec((SIZE, SIZE), tf.float32)
    return client.compile_function(tf.function(matmul_loop), spec, spec, name="matmul_loop")


class Call(threading.Thread):
    """Runs an Execute in the background and keeps its result or its error."""

    def __init__(self, executable, *arrays):
        super().__init__(daemon=True)
        self.executable, self.arrays = executable, arrays
        self.result = self.error = None
        self.start()

    def run(self):
        try:
            self.result = self.executable(*self.arrays)
        except grpc.RpcError as e:
            self.error = e


def wait_until_executing(daemon: Daemon, call: Call, timeout_s: float = 60) -> None:
    """Until the daemon's /metrics counts the Execute in flight."""
    deadline = time.monotonic() + timeout_s
    while True:
        metrics = httpx.get(f"{daemon.http}/metrics", timeout=10).text
        running = sum(s.value for family in text_string_to_metric_families(metrics) for s in family.samples
                      if s.name == "xlacs_in_flight" and s.labels.get("activity") == "execute")
        if running:
            return
        assert call.is_alive() and time.monotonic() < deadline, "the Execute never showed as in flight"
        time.sleep(0.05)


def test_sigterm_drains_an_in_flight_execute_and_exits_0(tmp_path):
    daemon = start(tmp_path, grace_s=120)
    try:
        x, w = inputs()
        with Client(daemon.address, timeout=300) as client, grpc.insecure_channel(daemon.address) as watcher:
            executable = compile_loop(client)
            watch = health_pb2_grpc.HealthStub(watcher).Watch(health_pb2.HealthCheckRequest(service=COMPILER_SERVICE))
            assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
            call = Call(executable, x, w)
            wait_until_executing(daemon, call)
            daemon.process.send_signal(signal.SIGTERM)

            assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
            watch.cancel()  # a Watch is a call in flight too: the drain would wait for it
            assert httpx.get(f"{daemon.http}/readyz", timeout=10).status_code == 503
            # A channel without the Client's retries: the refusal itself, at once, while the Execute runs.
            with grpc.insecure_channel(daemon.address) as late, pytest.raises(grpc.RpcError) as refused:
                xlacs_pb2_grpc.CompilerStub(late).ListOps(xlacs_pb2.ListOpsRequest(), timeout=30)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            assert call.is_alive(), "the Execute ended before the drain could be observed; make it longer"
            call.join(timeout=300)
        assert call.error is None, call.error
        np.testing.assert_allclose(call.result[0], tf.function(matmul_loop)(x, w).numpy(), rtol=1e-4, atol=1e-5)
        assert daemon.process.wait(timeout=60) == 0, daemon.output
        assert "stopped" in daemon.output and "cancelled" not in daemon.output
    finally:
        daemon.terminate()


def test_calls_still_running_at_the_deadline_are_cancelled_and_the_daemon_exits_0(tmp_path):
    # A loop that never ends is still running at the deadline however fast this machine is, and only the
    # shutdown can stop it (execute_deadline_s is far away): the daemon exits at all only if it cuts the call.
    daemon = start(tmp_path, grace_s=0.5, XLACS_EXECUTE_DEADLINE_S="3600")
    try:
        x = np.arange(4, dtype=np.float32)
        spec = tf.TensorSpec([4], tf.float32)
        with Client(daemon.address, timeout=300) as client:
            warm, never = (client.compile_function(tf.function(f), spec) for f in (bounded, endless))
            # Starts the execution worker, so that `never` runs there when the signal comes, rather than waits for
            # a worker to start.
            np.testing.assert_array_equal(warm(x)[0], tf.function(bounded)(x).numpy())
            call = Call(never, x)
            wait_until_executing(daemon, call)
            daemon.process.send_signal(signal.SIGTERM)
            assert daemon.process.wait(timeout=60) == 0, daemon.output
            call.join(timeout=60)
        assert call.error is not None and call.error.code() in (grpc.StatusCode.CANCELLED,
                                                                grpc.StatusCode.UNAVAILABLE), call.error
        assert "1 call(s) still running after 0.5 s were cancelled" in daemon.output
        assert daemon.leftovers() == [], f"the daemon left its execution worker running:\n{daemon.output}"
    finally:
        daemon.terminate()
