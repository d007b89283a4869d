"""Replicas of the compose stack sharing one Redis: a new replica is served from Redis, a killed one costs clients
nothing but a retry and leaves the load balancer within its health checks, a stopped one drains, and a Redis
restart under load fails no call."""
from __future__ import annotations

import dataclasses
import re
import threading
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests.deploy import files
from tests.oracle import assert_close
from tests.stack.conftest import docker
from xlacs.freeze import freeze

CLIENTS = 8
LOAD_S = 20  # each phase of load: long enough to span a kill or a restart and the failover after it


def health_check_timing() -> tuple[float, float, int]:
    """deploy/haproxy/haproxy.cfg's checks of a replica: seconds between them, each one's timeout, failures to drop it."""
    defaults = files.haproxy()["defaults"]
    server = next(line.split() for line in defaults if line.startswith("default-server "))
    timeout = next(line.split()[2] for line in defaults if line.startswith("timeout check "))
    return float(server[server.index("inter") + 1].rstrip("s")), float(timeout.rstrip("s")), \
        int(server[server.index("fall") + 1])


@dataclasses.dataclass
class Workload:
    """A CNN's frozen graph, its input and TensorFlow's output."""
    graph_def: bytes
    feeds: dict
    fetches: list
    x: np.ndarray
    want: np.ndarray

    def compile(self, client):
        return client.compile(self.graph_def, self.feeds, self.fetches)

    def check(self, got: np.ndarray) -> None:
        assert_close(got, self.want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(self.want).max())))


def cnn_workload(batch: int = 2, size: int = 32, seed: int = 4, widths=(16, 32, 32), pool: bool = True) -> Workload:
    """Convolutions of `widths` channels with ReLU (and 2x2 max pooling), a mean over space, a dense layer."""
    rng = np.random.default_rng(seed)
    kernels = [tf.constant(rng.normal(0, (2 / (9 * c_in)) ** 0.5, (3, 3, c_in, c_out)).astype(np.float32))
               for c_in, c_out in zip((3, *widths), widths)]
    dense = tf.constant(rng.normal(0, 0.2, (widths[-1], 10)).astype(np.float32))

    @tf.function
    def cnn(x):
        for kernel in kernels:
            x = tf.nn.relu(tf.nn.conv2d(x, kernel, strides=1, padding="SAME"))
            if pool:
                x = tf.nn.max_pool2d(x, 2, 2, "VALID")
        return tf.matmul(tf.reduce_mean(x, axis=[1, 2]), dense)
    x = rng.uniform(-1, 1, (batch, size, size, 3)).astype(np.float32)
    frozen = freeze(cnn, tf.TensorSpec(x.shape, tf.float32))
    return Workload(frozen.graph_def, frozen.feeds, frozen.fetches, x, cnn(x).numpy())


@pytest.fixture(scope="module")
def workload() -> Workload:
    """A small CNN: it compiles in about a second."""
    return cnn_workload()


class Load:
    """CLIENTS threads, each with a Client of its own through the load balancer, compiling and executing the
    workload until stopped (bounded by a count of calls). A call that raises is recorded with its status code and
    tried once more; `wrong` holds every answer that differed from TensorFlow's."""

    def __init__(self, stack, workload: Workload):
        self.stack, self.workload = stack, workload
        self.stop = threading.Event()
        self.ok, self.failed, self.retried_ok, self.wrong = 0, [], 0, []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(CLIENTS)]
        self.last_ok = [0.0] * CLIENTS  # when each client's last call (compile and execute) was served

    def call(self, client) -> None:
        executable = self.workload.compile(client)
        (got,) = executable(self.workload.x)
        try:
            self.workload.check(got)
        except AssertionError as e:
            self.wrong.append(str(e))

    def run(self, index: int) -> None:
        with self.stack.client(timeout=120) as client:
            for _ in range(2000):
                if self.stop.is_set():
                    return
                try:
                    self.call(client)
                    with self.lock:
                        self.ok += 1
                        self.last_ok[index] = time.monotonic()
                except grpc.RpcError as e:
                    with self.lock:
                        self.failed.append(f"{e.code().name}: {e.details()} ({time.monotonic() - self.started:.1f} s "
                                           f"into the load)")
                    self.call(client)  # if this raises too, the thread ends and assert_served counts a retry short
                    with self.lock:
                        self.retried_ok += 1
                        self.last_ok[index] = time.monotonic()

    def __enter__(self) -> "Load":
        self.started = time.monotonic()
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=300)
        assert not [t for t in self.threads if t.is_alive()], "a client thread did not end"

    def all_served_since(self, since: float, timeout: float = 60) -> float:
        """Seconds from `since` until every client has been served a call that ended after it."""
        while min(self.last_ok) <= since:
            assert time.monotonic() - since < timeout, f"clients unserved {timeout} s on: {self.last_ok}"
            time.sleep(0.05)
        return min(self.last_ok) - since  # the client served last since then

    def assert_served(self, minimum: int) -> None:
        assert not self.wrong, self.wrong[:3]
        assert self.ok >= minimum, (self.ok, self.failed)
        assert all(f.startswith("UNAVAILABLE") for f in self.failed), self.failed
        assert self.retried_ok == len(self.failed), (self.retried_ok, self.failed)


def test_a_third_replica_answers_the_same_compile_from_redis_without_compiling(stack, workload):
    with stack.client() as client:
        workload.compile(client)  # through the load balancer: compiled once, stored in Redis
    stack.report["scale_to_3_healthy_s"] = round(stack.scale(3), 1)
    third = stack.containers("xlacs")[-1]
    with stack.client(stack.address(third)) as client:
        executable = workload.compile(client)
        (got,) = executable(workload.x)
        assert executable.cache == "l2" and client.stats().compiles == 0
    workload.check(got)


def down_seconds(stack, ip: str, killed_at: float, timeout: float = 60) -> float:
    """Seconds from the kill until the load balancer logged the killed replica's gRPC server down."""
    pattern = re.compile(r"Server xlacs_grpc/(xlacs\d+) (?:is|is going) DOWN")  # by its checks, or out of the DNS
    slots = {m[1] for m in re.finditer(r"xlacs_grpc/(xlacs\d+) changed its IP from \S+ to " +
                                       re.escape(ip) + r"\b", stack.lb_log())}
    assert slots, f"the load balancer never resolved {ip}"
    while time.monotonic() - killed_at < timeout:
        if any(m[1] in slots for m in pattern.finditer(stack.lb_log())):
            return time.monotonic() - killed_at
        time.sleep(0.2)
    raise AssertionError(f"the load balancer still sends to {ip} {timeout} s after the kill:\n{stack.lb_log()}")


def test_a_replica_killed_under_load_fails_no_call_that_a_retry_does_not_serve(stack, workload):
    stack.scale(3)
    victim = stack.containers("xlacs")[0]
    ip = stack.ip(victim)
    with Load(stack, workload) as load:
        time.sleep(LOAD_S / 2)
        before = load.ok
        docker("kill", victim)
        killed_at = time.monotonic()
        failover_s = load.all_served_since(killed_at)
        down_s = down_seconds(stack, ip, killed_at)
        time.sleep(LOAD_S / 2)
        after_kill = load.ok - before
    load.assert_served(minimum=CLIENTS)
    assert after_kill >= CLIENTS, f"{after_kill} calls served after the kill"
    # `fall` failed checks, each at most `inter` after the last one ended and timing out after `timeout check` (or
    # sooner, once Docker's DNS drops it), a second of slack for the log.
    interval_s, timeout_s, fall = health_check_timing()
    assert down_s <= (interval_s + timeout_s) * fall + 1, down_s
    stack.report["kill"] = {"calls_ok": load.ok, "calls_failed_then_retried_ok": load.failed,
                            "every_client_served_again_s": round(failover_s, 2), "lb_marked_down_s": round(down_s, 1)}
    docker("start", victim)
    stack.wait_healthy("xlacs", 3)


def test_a_replica_stopped_mid_execute_finishes_the_call_and_exits_0_within_the_grace(stack):
    # About 270 GFLOP from a 400 KB input: an Execute of seconds on this machine, sent as one unary call.
    big = cnn_workload(batch=8, size=64, seed=5, widths=(256,) * 8, pool=False)
    replica = stack.containers("xlacs")[-1]
    grace_s = stack.inspect(replica)["Config"]["StopTimeout"]
    assert grace_s == 45  # the compose file's stop_grace_period
    with stack.client(stack.address(replica), timeout=300) as client:
        executable = big.compile(client)
        executable(big.x)  # the first run binds the weights
        start = time.monotonic()
        executable(big.x)
        run_s = time.monotonic() - start
        result = {}
        call = threading.Thread(target=lambda: result.update(out=executable(big.x)[0]))
        call.start()
        time.sleep(run_s / 5)  # the call is in flight
        assert call.is_alive()
        stopped = time.monotonic()
        docker("stop", replica, timeout=grace_s + 30)
        stop_s = time.monotonic() - stopped
        call.join(timeout=300)
    big.check(result["out"])
    state = stack.inspect(replica)["State"]
    assert state["ExitCode"] == 0 and not state["OOMKilled"], state
    assert run_s / 3 < stop_s < grace_s, (run_s, stop_s)  # it waited for the call, and not for the deadline
    stack.report["drain"] = {"execute_s": round(run_s, 2), "stop_s": round(stop_s, 2)}
    docker("start", replica)
    stack.wait_healthy("xlacs", len(stack.containers("xlacs")))


def test_a_redis_restart_under_load_fails_no_call_and_l2_comes_back(stack):
    workload = cnn_workload(seed=6)
    with Load(stack, workload) as load:
        time.sleep(LOAD_S / 4)
        stack.compose("restart", "redis", timeout=120)
        stack.wait_healthy("redis", 1)
        time.sleep(LOAD_S / 2)
    load.assert_served(minimum=CLIENTS)
    assert not load.failed, load.failed  # a Redis outage is the replicas' business, never a failed call
    # After the restart Redis is empty: a new program (weights are parameters: a new shape) compiles on one replica
    # and another replica loads it from L2.
    fresh = cnn_workload(size=24)
    first, second = stack.containers("xlacs")[:2]
    with stack.client(stack.address(first)) as client:
        assert fresh.compile(client).cache == "miss"
    with stack.client(stack.address(second)) as client:
        assert fresh.compile(client).cache == "l2"
