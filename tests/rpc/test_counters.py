"""The service's counters are exact under concurrency: RPCs served on many threads at once count each call
once, in GetStats and in /metrics."""
import concurrent.futures
import dis
import pathlib
import threading
import time

import grpc
import numpy as np
import pytest

import xlacs_server
from tests.deploy.daemon import double_graph
from tests.security.conftest import running
from xlacs import Client
from xlacs.v1 import xlacs_pb2
from xlacs_server.metrics import registry_for

THREADS, CALLS, FAILING = 16, 200, 50  # per thread: CALLS Executes that succeed and FAILING that do not
SERVER_CODE = str(pathlib.Path(xlacs_server.__file__).parent)
STORE_ATTR = dis.opmap["STORE_ATTR"]


@pytest.fixture
def switching_before_stores():
    """Threads started from here on hand the GIL over right before each attribute store in xlacs' own code.
    CPython switches threads only between some bytecodes, never inside `counters.x += 1`, so its GIL hides
    a lost update; a free-threaded interpreter does not. Here `+=` loses counts; a locked update does not."""
    def trace_calls(frame, event, arg):
        if frame.f_code.co_filename.startswith(SERVER_CODE):
            frame.f_trace_opcodes = True
            return trace_opcodes
        return None

    def trace_opcodes(frame, event, arg):
        if event == "opcode" and frame.f_code.co_code[frame.f_lasti] == STORE_ATTR:
            time.sleep(0)  # releases the GIL: another thread may run before the store
        return trace_opcodes

    threading.settrace(trace_calls)
    yield
    threading.settrace(None)


def test_concurrent_executes_are_counted_exactly(switching_before_stores):
    # Every Execute of every thread is admitted, none refused as RESOURCE_EXHAUSTED; the gRPC threads exceed
    # the calls the gates admit, as the settings require.
    with running(max_concurrent_executes=THREADS, execute_queue=THREADS, workers=2 * THREADS + 8) as server, \
            Client(server.address, timeout=300) as client:
        graph, feeds, fetches = double_graph()
        executable = client.compile(graph, feeds, fetches)
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        metrics = registry_for(server.service)
        before, requests_before = client.stats(), metrics.get_sample_value("xlacs_rpc_requests_total")

        def calls(_):
            for _ in range(CALLS):
                np.testing.assert_array_equal(executable(x)[0], x * 2)
            for _ in range(FAILING):
                with pytest.raises(grpc.RpcError) as e:
                    client.stub.Execute(xlacs_pb2.ExecuteRequest(executable_id="never-compiled"), timeout=300)
                assert e.value.code() == grpc.StatusCode.NOT_FOUND
        with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(calls, range(THREADS)))

        after = client.stats()
        requests = metrics.get_sample_value("xlacs_rpc_requests_total") - requests_before
    # Every Execute, and the GetStats after them, which counts itself before it answers.
    assert (after.executes - before.executes, after.errors - before.errors, requests) == \
        (THREADS * CALLS, THREADS * FAILING, THREADS * (CALLS + FAILING) + 1)


def test_concurrent_executes_leave_the_execute_metrics_and_slots_as_they_found_them(switching_before_stores):
    # Each call that reaches the program is timed once (xlacs_execute_seconds) and counted in flight while it runs,
    # whether it returns outputs or fails the input checks (a wrong shape); when all are done, nothing is in
    # flight. One slot: a call that kept it would leave every later call waiting until its deadline.
    with running(max_concurrent_executes=1, execute_queue=THREADS, workers=THREADS + 16) as server, \
            Client(server.address, timeout=300) as client:
        graph, feeds, fetches = double_graph()
        executable = client.compile(graph, feeds, fetches)
        x, wrong = np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros((3, 2), np.float32)
        metrics = registry_for(server.service)
        seconds = metrics.get_sample_value("xlacs_execute_seconds_count", {"device": "cpu:0"}) or 0

        def calls(_):
            for _ in range(20):
                np.testing.assert_array_equal(executable(x)[0], x * 2)
                with pytest.raises(grpc.RpcError) as e:
                    executable(wrong)
                assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "expected" in e.value.details()
        with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(calls, range(THREADS)))

        timed = metrics.get_sample_value("xlacs_execute_seconds_count", {"device": "cpu:0"}) - seconds
        running_now = metrics.get_sample_value("xlacs_in_flight", {"device": "cpu:0", "activity": "execute"})
        admitted = metrics.get_sample_value("xlacs_calls_in_flight", {"rpc": "Execute"})
        np.testing.assert_array_equal(executable(x)[0], x * 2)  # the slot is free
    assert timed == THREADS * 20 * 2
    assert (running_now, admitted) == (0, 0)
