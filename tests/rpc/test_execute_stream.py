"""ExecuteStream over real gRPC: large tensors in pieces both ways give numpy's results; every piece out of place
is INVALID_ARGUMENT naming its input; the stream goes through the Execute gate, its limits, counters and metrics;
the client picks the stream for large calls by itself."""
import threading
import time

import grpc
import ml_dtypes
import numpy as np
import pytest

from tests.graphs import GraphBuilder
from tests.security.conftest import running
from xlacs import Client, streaming, tensors
from xlacs.v1 import tf_graph_pb2 as tf, xlacs_pb2
from xlacs_server.metrics import registry_for

ROWS = 3 * tensors.PIECE_BYTES // 4 + 5  # float32 rows: three pieces and some bytes


def scale_graph(rows: int, dtype=np.float32) -> tuple[bytes, dict, list]:
    """y = x * s + 1 for x of `rows` elements and a scalar s; also n + 1 for an int32[4] n."""
    b = GraphBuilder()
    b.placeholder("x", shape=(rows,), dtype=dtype)
    b.placeholder("s", shape=(), dtype=dtype)
    b.placeholder("n", shape=(4,), dtype=np.int32)
    b.const("one", np.ones((), dtype))
    b.const("one_int", np.int32(1))
    b.op("xs", "Mul", "x", "s", T=dtype)
    b.op("y", "AddV2", "xs", "one", T=dtype)
    b.op("m", "AddV2", "n", "one_int", T=np.int32)
    feeds = {"x:0": (np.dtype(dtype), (rows,)), "s:0": (np.dtype(dtype), ()), "n:0": ("int32", (4,))}
    return b.bytes(), feeds, ["y:0", "m:0"]


@pytest.fixture(scope="module")
def server():
    with running() as server:
        yield server


@pytest.fixture(scope="module")
def executable(server):
    with Client(server.address, timeout=120) as client:
        yield client.compile(*scale_graph(ROWS))


def inputs(rows: int = ROWS, dtype=np.float32) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(rows)
    return {"x:0": rng.uniform(-1, 1, rows).astype(dtype), "s:0": np.asarray(2, dtype),
            "n:0": np.arange(4, dtype=np.int32)}


def test_large_tensors_stream_both_ways_and_match_numpy(server, executable):
    given = inputs()
    before = dict(server.service.counters.received())
    y, m = executable.execute(given)  # 12 MB in and out: the client streams
    np.testing.assert_array_equal(y, given["x:0"] * np.float32(2) + np.float32(1))
    np.testing.assert_array_equal(m, given["n:0"] + 1)
    assert y.flags.writeable and y.dtype == np.float32 and y.shape == (ROWS,)
    received = server.service.counters.received()
    assert received.get("ExecuteStream", 0) - before.get("ExecuteStream", 0) > ROWS * 4
    assert received.get("Execute", 0) == before.get("Execute", 0)


def test_responses_are_pieces_of_at_most_piece_bytes_with_execute_ms_first(server, executable):
    given = inputs()
    requests = [xlacs_pb2.ExecuteRequest(executable_id=executable.id)]
    for name, array in given.items():
        for offset, content in tensors.pieces(array):
            tensors.fill_piece(requests[-1].inputs.add(), name, array, offset, content)
            requests.append(xlacs_pb2.ExecuteRequest())
    with Client(server.address) as client:
        responses = list(client.stub.ExecuteStream(iter(requests), timeout=120))
    pieces = [(t.name, t.offset, len(t.content)) for r in responses for t in r.outputs]
    assert pieces == [("y:0", offset, min(tensors.PIECE_BYTES, ROWS * 4 - offset))
                      for offset in range(0, ROWS * 4, tensors.PIECE_BYTES)] + [("m:0", 0, 16)]
    assert responses[0].execute_ms > 0 and all(r.execute_ms == 0 for r in responses[1:])


def test_small_calls_go_unary_and_any_call_can_stream(server, executable):
    with Client(server.address, timeout=120) as client:
        small = client.compile(*scale_graph(7, ml_dtypes.bfloat16))
        given = inputs(7, ml_dtypes.bfloat16)
        before = dict(server.service.counters.received())
        want = given["x:0"] * given["s:0"] + np.ones((), ml_dtypes.bfloat16)
        np.testing.assert_array_equal(small.execute(given)[0], want)
        assert server.service.counters.received().get("ExecuteStream", 0) == before.get("ExecuteStream", 0)
        y, m = streaming.execute(client.channel, small.id, given, 120)
        np.testing.assert_array_equal(y, want)
        assert y.dtype == ml_dtypes.bfloat16 and m.tolist() == [1, 2, 3, 4]


def piece(name: str, content: bytes = b"", offset: int = 0, dtype: int = 0, shape=()) -> xlacs_pb2.Tensor:
    return xlacs_pb2.Tensor(name=name, content=content, offset=offset, dtype=dtype, shape=list(shape))


def first(name: str, content: bytes, shape=(ROWS,), dtype: int = tf.DT_FLOAT) -> xlacs_pb2.Tensor:
    return piece(name, content, 0, dtype, shape)


SMALL = [first("s:0", bytes(4), ()), first("n:0", bytes(16), (4,), tf.DT_INT32)]
BAD_PIECES = {  # case -> (the pieces, in requests of one piece each; what the message says)
    "gap": ([first("x:0", bytes(16)), piece("x:0", bytes(16), 32)], "leaves a gap after the 16 bytes"),
    "overlap": ([first("x:0", bytes(16)), piece("x:0", bytes(16), 8)], "overlaps the 16 bytes"),
    "past the end": ([first("x:0", bytes(ROWS * 4 - 8)), piece("x:0", bytes(16), ROWS * 4 - 8)],
                     f"ends at {ROWS * 4 + 8}, past the {ROWS * 4} bytes"),
    "too few bytes": ([first("x:0", bytes(ROWS * 4 - 4))], f"carries {ROWS * 4 - 4} bytes but its shape"),
    "too few, then the next input": ([first("x:0", bytes(8)), *SMALL], "carries 8 bytes but its shape"),
    "unknown input": ([first("z:0", bytes(8), (2,))], "is not an input of executable"),
    "repeated input": ([first("x:0", bytes(ROWS * 4)), *SMALL, first("x:0", bytes(ROWS * 4))],
                       "is given more than once"),
    "dtype changes": ([first("x:0", bytes(16)), piece("x:0", bytes(16), 16, tf.DT_INT32)], "has int32"),
    "shape changes": ([first("x:0", bytes(16)), piece("x:0", bytes(16), 16, shape=(ROWS + 1,))],
                      f"[{ROWS + 1}], its first piece float32[{ROWS}]"),
    "first piece not at 0": ([piece("x:0", bytes(16), 16, tf.DT_FLOAT, (ROWS,))], "its first piece is at offset 16"),
    "unsupported dtype": ([first("x:0", bytes(16), dtype=tf.DT_STRING)], "dtype string"),
    "negative dimension": ([first("x:0", b"", (-1,))], "negative dimension"),
    "a handle and bytes": ([xlacs_pb2.Tensor(name="x:0", handle="resident-1", content=bytes(16))],
                           "has a handle and bytes too"),
}


@pytest.mark.parametrize("case", BAD_PIECES)
def test_a_piece_out_of_place_is_invalid_argument_naming_its_input(server, executable, case):
    pieces, says = BAD_PIECES[case]
    requests = [xlacs_pb2.ExecuteRequest(inputs=[p]) for p in pieces]
    requests[0].executable_id = executable.id
    with Client(server.address) as client, pytest.raises(grpc.RpcError) as e:
        list(client.stub.ExecuteStream(iter(requests), timeout=60))
    named = pieces[-1].name if case != "too few, then the next input" else "x:0"
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    assert f"input {named!r}" in e.value.details() and says in e.value.details(), e.value.details()


@pytest.mark.parametrize("requests,says", [
    ([], "names the executable (executable_id)"),
    ([xlacs_pb2.ExecuteRequest(inputs=[first("x:0", bytes(16))])], "names the executable (executable_id)"),
])
def test_a_stream_without_executable_id_first_is_invalid_argument(server, requests, says):
    with Client(server.address) as client, pytest.raises(grpc.RpcError) as e:
        list(client.stub.ExecuteStream(iter(requests), timeout=60))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and says in e.value.details()


def test_an_unknown_executable_is_not_found_and_the_client_compiles_again(server, executable):
    with Client(server.address) as client, pytest.raises(grpc.RpcError) as e:
        list(client.stub.ExecuteStream(iter([xlacs_pb2.ExecuteRequest(executable_id="nope-1")]), timeout=60))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND and "nope-1" in e.value.details()
    with Client(server.address, timeout=120) as client:
        again = client.compile(*scale_graph(ROWS))
        with server.service.executables._lock:
            server.service.executables._loaded.pop(again.id)  # as an eviction or a restart would
        given = inputs()
        np.testing.assert_array_equal(again.execute(given)[0], given["x:0"] * np.float32(2) + np.float32(1))


def test_max_input_bytes_refuses_a_declared_size_before_its_bytes_come():
    with running(max_input_bytes=ROWS * 4) as server, Client(server.address, timeout=120) as client:
        executable = client.compile(*scale_graph(ROWS))
        with pytest.raises(grpc.RpcError) as e:
            executable.execute(inputs())  # x alone fills the limit: s comes over it
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "over the limit max_input_bytes=" in e.value.details()
        # A first piece that declares a huge shape is refused at once, with its bytes unsent.
        requests = [xlacs_pb2.ExecuteRequest(executable_id=executable.id,
                                             inputs=[first("x:0", b"", shape=(1 << 40,))])]
        with pytest.raises(grpc.RpcError) as e:
            list(client.stub.ExecuteStream(iter(requests), timeout=60))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and f"{4 << 40} bytes" in e.value.details()


@pytest.fixture
def one_slot():
    """A daemon with one Execute slot and one queue place, whose executions wait, once they hold the slot, until
    `release` is set; `entered` is set when one holds it."""
    with running(max_concurrent_executes=1, execute_queue=1) as server, \
            Client(server.address, timeout=120) as client:
        execute, release, entered = server.service.execute, threading.Event(), threading.Event()

        def holding(executable_id, inputs, client_s, *args, **kwargs):
            entered.set()
            release.wait(60)
            return execute(executable_id, inputs, client_s, *args, **kwargs)
        server.service.execute = holding
        yield server, client, client.compile(*scale_graph(ROWS)), release, entered
        release.set()


def test_streams_share_the_execute_gate_its_queue_and_its_counters(one_slot):
    server, client, executable, release, entered = one_slot
    metrics = registry_for(server.service)
    executes, seconds = client.stats().executes, metrics.get_sample_value(
        "xlacs_execute_seconds_count", {"device": "cpu:0"}) or 0
    given = inputs()
    pool = [threading.Thread(target=lambda: results.append(executable.execute(given))) for _ in range(2)]
    results = []
    pool[0].start()
    assert entered.wait(30)  # the first holds the only slot
    pool[1].start()
    deadline = time.monotonic() + 30
    while metrics.get_sample_value("xlacs_calls_in_flight", {"rpc": "Execute"}) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.raises(grpc.RpcError) as e:  # a third, unary or streamed, finds the queue full
        streaming.execute(client.channel, executable.id, given, 60)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "execute_queue" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        list(client.stub.ExecuteStream(iter([xlacs_pb2.ExecuteRequest(executable_id=executable.id)]),
                                       timeout=0.5))
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    release.set()
    for thread in pool:
        thread.join(60)
    want = given["x:0"] * np.float32(2) + np.float32(1)
    assert len(results) == 2 and all(np.array_equal(y, want) for y, _ in results)
    assert client.stats().executes - executes == 2
    assert metrics.get_sample_value("xlacs_execute_seconds_count", {"device": "cpu:0"}) - seconds == 2
    assert metrics.get_sample_value("xlacs_calls_in_flight", {"rpc": "Execute"}) == 0


def test_a_call_waiting_for_an_execute_slot_leaves_at_its_deadline_or_when_cancelled(one_slot):
    server, client, executable, release, entered = one_slot
    given = inputs()
    holder = threading.Thread(target=lambda: executable.execute(given))
    holder.start()
    assert entered.wait(30)
    start = time.monotonic()
    with pytest.raises(grpc.RpcError) as e:
        streaming.execute(client.channel, executable.id, given, 1.0)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED and time.monotonic() - start < 10
    metrics = registry_for(server.service)
    deadline = time.monotonic() + 10  # the waiting call leaves the queue within a poll
    while metrics.get_sample_value("xlacs_calls_in_flight", {"rpc": "Execute"}) != 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    request = xlacs_pb2.ExecuteRequest(executable_id=executable.id,
                                       inputs=[tensors.to_proto(n, a) for n, a in given.items()])
    waiting = client.stub.Execute.future(request, timeout=60)
    while metrics.get_sample_value("xlacs_calls_in_flight", {"rpc": "Execute"}) != 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    waiting.cancel()
    while metrics.get_sample_value("xlacs_calls_in_flight", {"rpc": "Execute"}) != 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    release.set()
    holder.join(60)
    assert not holder.is_alive()


def test_a_call_under_stream_bytes_goes_unary_its_tensors_whole(server):
    rows = 300_000  # 1.2 MB in and 1.2 MB out: under STREAM_BYTES, each tensor written once into one Execute
    with Client(server.address, timeout=120) as client:
        executable = client.compile(*scale_graph(rows))
        given = inputs(rows)
        before = dict(server.service.counters.received())
        y, m = executable.execute(given)
        after = server.service.counters.received()
        assert after.get("ExecuteStream", 0) == before.get("ExecuteStream", 0)
        assert after["Execute"] - before.get("Execute", 0) > given["x:0"].nbytes
        np.testing.assert_array_equal(y, given["x:0"] * given["s:0"] + np.float32(1))
        assert m.tolist() == (given["n:0"] + 1).tolist()


@pytest.mark.parametrize("case, says", [
    ("short", "tensor 'x:0' carries 1199996 bytes but its shape [300000] of float32 needs 1200000"),
    ("handle and bytes", "input 'x:0' has a handle and bytes too"),
    ("truncated", "is not a well-formed xlacs.v1.ExecuteRequest"),
])
def test_a_large_execute_read_in_place_refuses_bad_input_naming_it(server, case, says):
    """A request of READ_IN_PLACE_BYTES or more is read in place (rpc/execute_wire.py), with the checks of
    protobuf's path: a content whose size disagrees with its shape, bytes beside a handle, a cut message."""
    rows = 300_000  # 1.2 MB: read in place
    with Client(server.address, timeout=120) as client:
        executable = client.compile(*scale_graph(rows))
        given = inputs(rows)
        request = xlacs_pb2.ExecuteRequest(executable_id=executable.id)
        for name, array in given.items():
            tensors.fill(request.inputs.add(), name, array)
        x = request.inputs[0]
        if case == "short":
            x.content = x.content[:-4]
        elif case == "handle and bytes":
            x.handle = "resident-1"
        data = request.SerializeToString()
        send = client.channel.unary_unary("/xlacs.v1.Compiler/Execute")
        with pytest.raises(grpc.RpcError) as e:
            send(data[:-100] if case == "truncated" else data, timeout=60)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and says in e.value.details()
