"""Executions that never end cannot wedge a replica: programs with loops run in execution workers that are
killed past the client's deadline or execute_deadline_s and replaced, so after eight runaway loops (twice the
Execute slots) good Executes still run at once, loops included."""
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests.security.conftest import running
from xlacs import Client, tensors
from xlacs.v1 import xlacs_pb2
from xlacs_server.metrics import registry_for

SLOTS = 4


def endless(x):
    """x + 1 until x < 0: float32 stops growing at 2^24, so the loop never ends (as in TensorFlow)."""
    return tf.while_loop(lambda v: tf.reduce_all(v >= 0.0), lambda v: v + 1.0, [x])[0]


def bounded(x):
    """Five doublings in a loop: a program that runs in a worker too, and ends."""
    return tf.while_loop(lambda i, v: i < 5, lambda i, v: (i + 1, v * 2.0), [tf.constant(0), x])[1]


SPEC = tf.TensorSpec([4], tf.float32)
X = np.arange(4, dtype=np.float32)


@pytest.fixture(scope="module")
def server():
    with running(max_concurrent_executes=SLOTS, execute_queue=SLOTS, execute_deadline_s=60) as server:
        yield server


def test_eight_runaway_loops_then_good_executes_run_at_once(server):
    with Client(server.address, timeout=120) as client:
        runaway = client.compile_function(tf.function(endless), SPEC)
        good_loop = client.compile_function(tf.function(bounded), SPEC)
        plain = client.compile_function(tf.function(lambda x: x * 3.0), SPEC)
        np.testing.assert_array_equal(good_loop(X)[0], X * 32)  # starts a worker before the runaways
    with Client(server.address) as impatient:
        for _ in range(2 * SLOTS):
            with pytest.raises(grpc.RpcError) as e:
                _execute(impatient, runaway.id, runaway.input_names[0], X, timeout=1.5)
            assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    with Client(server.address, timeout=30) as client:
        start = time.monotonic()
        np.testing.assert_array_equal(_outputs(client, plain.id, plain.input_names[0], X)[0], X * 3)
        assert time.monotonic() - start < 2
        start = time.monotonic()
        np.testing.assert_array_equal(_outputs(client, good_loop.id, good_loop.input_names[0], X)[0], X * 32)
        assert time.monotonic() - start < 2 + 10  # a replacement worker may still be starting (jax imports)
    # A run is killed at its own deadline, which the client's may precede by a moment: wait for the last kill.
    pools = server.service.workers.pools()
    deadline = time.monotonic() + 60
    while sum(p.killed for p in pools) < 2 * SLOTS and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sum(p.killed for p in pools) == 2 * SLOTS
    metrics = registry_for(server.service)
    assert metrics.get_sample_value("xlacs_execution_workers_total", {"device": "cpu:0", "event": "killed"}) == 2 * SLOTS


def test_a_runaway_loop_past_the_servers_limit_is_deadline_exceeded_naming_it():
    with running(execute_deadline_s=1) as server, Client(server.address, timeout=60) as client:
        runaway = client.compile_function(tf.function(endless), SPEC)
        with pytest.raises(grpc.RpcError) as e:
            runaway(X)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "execute_deadline_s=1 s" in e.value.details() and "worker" in e.value.details()


def test_a_program_without_loops_runs_in_the_daemon(server):
    with Client(server.address, timeout=60) as client:
        plain = client.compile_function(tf.function(lambda x: x - 1.0), SPEC)
        np.testing.assert_array_equal(plain(X)[0], X - 1)
    assert not server.service.loaded(plain.id).executable.isolated


def _execute(client, executable_id, name, x, timeout):
    request = xlacs_pb2.ExecuteRequest(executable_id=executable_id)
    tensors.fill(request.inputs.add(), name, x)
    return [tensors.from_proto(t) for t in client.stub.Execute(request, timeout=timeout).outputs]


def _outputs(client, executable_id, name, x):
    return _execute(client, executable_id, name, x, timeout=30)
