"""A Compile still parsing its GraphDef at SIGTERM counts as in flight: the daemon cuts it at the deadline
and exits then, rather than log "stopped" and live on until the parse and the compile end."""
import signal
import time

import grpc
import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from tests.deploy.test_shutdown import start
from tests.graphs import GraphBuilder
from xlacs import Client
from xlacs.v1 import xlacs_pb2

NODES = 100_000


def long_chain() -> bytes:
    """y = x + 1 + 1 + ... (NODES additions): seconds to import, pass over and lower."""
    b = GraphBuilder()
    b.placeholder("x", shape=(4,))
    b.const("one", np.float32(1))
    previous = "x"
    for i in range(NODES):
        previous = b.op(f"a{i}", "AddV2", previous, "one")
    return b.bytes()


def calls_in_flight(daemon) -> float:
    metrics = httpx.get(f"{daemon.http}/metrics", timeout=10).text
    return sum(s.value for family in text_string_to_metric_families(metrics) for s in family.samples
               if s.name == "xlacs_calls_in_flight")


def test_a_compile_still_parsing_at_sigterm_is_cut_at_the_deadline(tmp_path):
    graph_def = long_chain()
    daemon = start(tmp_path, grace_s=0.5, XLACS_WORKERS="32")
    try:
        with Client(daemon.address, timeout=600) as client:
            call = client.stub.Compile.future(xlacs_pb2.CompileRequest(
                graph_def=graph_def, fetches=[f"a{NODES - 1}:0"],
                feeds=[xlacs_pb2.TensorSpec(name="x:0", dtype=1, shape=[4])]), timeout=600)
            deadline = time.monotonic() + 120
            while not calls_in_flight(daemon):
                assert time.monotonic() < deadline and not call.done(), "the Compile never showed as in flight"
                time.sleep(0.05)
            signalled = time.monotonic()
            daemon.process.send_signal(signal.SIGTERM)
            assert daemon.process.wait(timeout=120) == 0, daemon.output
            assert time.monotonic() - signalled < 30, daemon.output
            assert call.exception(timeout=60).code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
        assert "1 call(s) still running after 0.5 s were cancelled" in daemon.output
    finally:
        daemon.terminate()
