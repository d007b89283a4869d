"""What one request may cost: each limit answers RESOURCE_EXHAUSTED naming its setting, before the work (or
the allocation) it bounds; full queues fail fast; deadlines and cancellation free the slots."""
import contextlib
import itertools
import threading
import time

import grpc
import httpx
import numpy as np
import pytest

from tests.graphs import GraphBuilder
from tests.security.conftest import add_graph, healthy, running
from xlacs import Client, tensors
from xlacs.v1 import tf_graph_pb2 as tf, xlacs_pb2
from xlacs_server.config import Settings
from xlacs_server.dashboard import create_app
from xlacs_server.dashboard.http import HttpServer
from xlacs_server.graph.ir import FuncRef
from xlacs_server.metrics import registry_for
from xlacs_server.errors import Cancelled, LimitExceeded
from xlacs_server.gates import Gates, Slots

FEEDS = {"x:0": ("float32", (2, 3))}


def over_limit(excinfo, setting: str) -> None:
    assert excinfo.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, excinfo.value.details()
    assert f"over the limit {setting}=" in excinfo.value.details()
    assert f"XLACS_{setting.upper()}" in excinfo.value.details()


def chain_graph(length: int) -> bytes:
    b = GraphBuilder()
    b.placeholder("x")
    for i in range(length):
        b.op(f"n{i}", "Neg", f"n{i - 1}" if i else "x")
    return b.bytes()


def nested_functions(depth: int, recursive: bool = False) -> bytes:
    """x -> f0 -> f1 -> ... -> f{depth-1}, each a PartitionedCall of the next; the last adds 1."""
    b = GraphBuilder()
    b.placeholder("x")
    call = dict(Tin=[np.dtype(np.float32)], Tout=[np.dtype(np.float32)])
    b.node("y", "PartitionedCall", "x", f=FuncRef("f0", {}), **call)
    for level in range(depth):
        f = b.graph_def.library.function.add()
        f.signature.name = f"f{level}"
        f.signature.input_arg.add(name="a", type=tf.DT_FLOAT)
        f.signature.output_arg.add(name="out", type=tf.DT_FLOAT)
        inner = GraphBuilder()
        if level == depth - 1 and not recursive:
            inner.const("one", np.float32(1).reshape(()))
            inner.op("r", "AddV2", "a", "one:output:0")
            f.ret["out"] = "r:z:0"
        else:
            inner.node("r", "PartitionedCall", "a", f=FuncRef(f"f{(level + 1) % depth}", {}), **call)
            f.ret["out"] = "r:output:0"
        f.node_def.extend(inner.graph_def.node)
    return b.bytes()


@pytest.fixture(scope="module")
def small():
    """A daemon with tiny limits."""
    with running(max_graph_bytes=4000, max_graph_nodes=60, max_function_depth=3, max_tensor_elements=1 << 20,
                 max_input_bytes=1000) as server:
        with Client(server.address, timeout=120) as client:
            yield server, client


def test_graph_bytes(small):
    _, client = small
    data = chain_graph(200)
    assert len(data) > 4000
    for call in (lambda: client.compile(data, FEEDS, ["n199:0"]), lambda: client.check(data)):
        with pytest.raises(grpc.RpcError) as e:
            call()
        over_limit(e, "max_graph_bytes")


def test_node_count(small):
    _, client = small
    got, = client.compile(chain_graph(50), FEEDS, ["n49:0"])(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(got, np.ones((2, 3), np.float32))  # an even number of Negs
    b = GraphBuilder()
    b.placeholder("x")
    for i in range(70):
        b.node(f"c{i}", "NoOp")
    with pytest.raises(grpc.RpcError) as e:
        client.compile(b.bytes(), FEEDS, ["x:0"])
    over_limit(e, "max_graph_nodes")
    assert "71 nodes" in e.value.details()


def test_function_nesting_depth(small):
    _, client = small
    got, = client.compile(nested_functions(3), FEEDS, ["y:0"])(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(got, np.full((2, 3), 2, np.float32))
    with pytest.raises(grpc.RpcError) as e:
        client.compile(nested_functions(4), FEEDS, ["y:0"])
    over_limit(e, "max_function_depth")
    assert "chain of 4 nested" in e.value.details()


def test_recursive_functions_are_invalid(small):
    _, client = small
    with pytest.raises(grpc.RpcError) as e:
        client.compile(nested_functions(2, recursive=True), FEEDS, ["y:0"])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "calls itself" in e.value.details()


def peak_rss_after(call) -> int:
    """The growth of this process's peak RSS (the daemon runs in it) while `call` runs."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets the peak (VmHWM) to the current RSS
    before = current_kib("VmRSS")
    call()
    return (current_kib("VmHWM") - before) * 1024


def current_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith(field)).split()[1])


def fill_graph(dims) -> bytes:
    b = GraphBuilder()
    b.placeholder("x")
    b.const("dims", np.array(dims, np.int64))
    b.const("value", np.float32(0).reshape(()))
    b.node("big", "Fill", "dims", "value", T=np.dtype(np.float32), index_type=np.dtype(np.int64))
    b.const("axes", np.array([0, 1], np.int32))
    b.op("total", "Sum", "big", "axes", Tidx=np.dtype(np.int32), keep_dims=False)
    return b.bytes()


def test_a_computed_tensor_over_the_limit_is_refused_before_it_is_allocated(small):
    """Fill folds on the host: 10^8 float32 (400 MB) would be allocated if the limit came after."""
    _, client = small

    def refused():
        with pytest.raises(grpc.RpcError) as e:
            client.compile(fill_graph([10_000, 10_000]), FEEDS, ["total:0"])
        over_limit(e, "max_tensor_elements")
        assert "node 'big' (Fill)" in e.value.details()
    assert peak_rss_after(refused) < 100 << 20
    got, = client.compile(fill_graph([100, 100]), FEEDS, ["total:0"])(np.ones((2, 3), np.float32))
    assert got == 0


@pytest.mark.parametrize("make, feeds, fetch, named", [
    (lambda: fill_graph([10 ** 6, 10 ** 6]), FEEDS, "total:0", "node 'big' (Fill)"),  # folded on the host
    (lambda: add_graph(shape=(-1, -1)), {"x:0": ("float32", (10 ** 6, 10 ** 6))}, "y:0", "feed 'x:0'"),
])
def test_a_trillion_elements_are_refused_with_the_default_limit(client, make, feeds, fetch, named):
    with pytest.raises(grpc.RpcError) as e:
        client.compile(make(), feeds, [fetch])
    over_limit(e, "max_tensor_elements")
    assert named in e.value.details() and "1000000000000 elements" in e.value.details()


def test_a_constant_of_a_trillion_elements_is_refused_before_it_is_filled(client):
    b = GraphBuilder()
    b.placeholder("x")
    const = b.graph_def.node.add(name="c", op="Const")
    const.attr["dtype"].type = tf.DT_FLOAT
    const.attr["value"].tensor.dtype = tf.DT_FLOAT  # no values: TF fills the shape with zeros
    const.attr["value"].tensor.tensor_shape.dim.extend([tf.TensorShapeProto.Dim(size=10 ** 6)] * 2)
    b.op("y", "AddV2", "x", "c")
    with pytest.raises(grpc.RpcError) as e:
        client.compile(b.bytes(), FEEDS, ["y:0"])
    over_limit(e, "max_tensor_elements")
    assert "node 'c' (Const)" in e.value.details()


def test_range_and_traced_shapes_over_the_limit(client):
    b = GraphBuilder()
    b.placeholder("x")
    b.const("start", np.int64(0))
    b.const("limit", np.int64(10 ** 12))
    b.const("delta", np.int64(1))
    b.node("r", "Range", "start", "limit", "delta", Tidx=np.dtype(np.int64))
    b.const("multiples", np.array([10 ** 6, 10 ** 6], np.int32))
    b.node("t", "Tile", "x", "multiples", T=np.dtype(np.float32), Tmultiples=np.dtype(np.int32))
    for fetch, named in (("r:0", "node 'r' (Range)"), ("t:0", "node 't' (Tile)")):
        with pytest.raises(grpc.RpcError) as e:
            client.compile(b.bytes(), FEEDS, [fetch])
        over_limit(e, "max_tensor_elements")
        assert named in e.value.details()


def test_execute_input_bytes(small):
    _, client = small
    executable = client.compile(add_graph(shape=(300,)), {"x:0": ("float32", (300,))}, ["y:0"])
    with pytest.raises(grpc.RpcError) as e:
        executable(np.zeros(300, np.float32))  # 1200 bytes
    over_limit(e, "max_input_bytes")
    got, = client.compile(add_graph(), FEEDS, ["y:0"])(np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(got, np.ones((2, 3), np.float32))


# --- Gates: slots, queues, deadlines, cancellation -------------------------------------------------

@pytest.fixture
def gated():
    """A daemon with one compile slot and one queue place, whose compiles of graphs named "hold" hold the
    slot (checking their call between polls) until `release` is set."""
    with running(max_concurrent_compiles=1, compile_queue=1, max_concurrent_executes=1, execute_queue=1,
                 workers=8) as server:
        release = threading.Event()
        held = threading.Event()
        compile = server.service.compile

        def holding(spec, checkpoint, slot):
            if spec.graph_name == "hold":
                with slot():
                    held.set()
                    while not release.wait(0.02):
                        checkpoint("the held stage")
            return compile(spec, checkpoint, slot)
        server.service.compile = holding
        with Client(server.address, timeout=120) as client:
            yield server, client, release, held
        release.set()


_rows = itertools.count(1000)


def compile_future(client: Client, name: str, timeout: float = 120):
    """A Compile of a program no cache tier holds (a cache hit takes no slot), but for the one named "hold"."""
    shape = [2, 3] if name == "hold" else [next(_rows), 3]
    request = xlacs_pb2.CompileRequest(graph_def=add_graph(tuple(shape)), fetches=["y:0"], graph_name=name,
                                       feeds=[xlacs_pb2.TensorSpec(name="x:0", dtype=1, shape=shape)])
    return client.stub.Compile.future(request, timeout=timeout)


def test_a_full_queue_fails_fast_and_health_still_answers(gated):
    server, client, release, held = gated
    running_call = compile_future(client, "hold")
    assert held.wait(30)
    waiting = compile_future(client, "quick")
    time.sleep(0.2)  # let it take the queue place
    start = time.monotonic()
    with pytest.raises(grpc.RpcError) as e:
        client.check(add_graph())  # CheckGraph shares the compile gate
    assert time.monotonic() - start < 5
    over_limit(e, "compile_queue")
    assert healthy(server.address)
    release.set()
    assert running_call.result().executable_id and waiting.result().executable_id


def test_a_cancelled_call_frees_its_queue_place_and_its_slot(gated):
    server, client, release, held = gated
    holder = compile_future(client, "hold")
    assert held.wait(30)
    queued = compile_future(client, "quick")
    time.sleep(0.2)
    queued.cancel()
    time.sleep(0.2)
    second = compile_future(client, "quick")  # takes the place the cancelled call left
    time.sleep(0.2)
    assert not second.done()
    holder.cancel()  # its work stops at its next checkpoint, and the slot goes to the waiting call
    assert second.result(timeout=60).executable_id
    assert not release.is_set()


def test_a_client_deadline_ends_a_waiting_call_and_frees_its_place(gated):
    _, client, release, held = gated
    holder = compile_future(client, "hold")
    assert held.wait(30)
    with pytest.raises(grpc.RpcError) as e:
        compile_future(client, "quick", timeout=0.5).result()
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    time.sleep(0.2)
    queued = compile_future(client, "quick")
    release.set()
    assert holder.result().executable_id and queued.result().executable_id


def test_the_compile_deadline_stops_a_compile():
    with running(compile_deadline_s=0.5) as server, Client(server.address, timeout=120) as client:
        compile = server.service.compile

        def slow(spec, checkpoint, slot):
            while True:
                checkpoint("the slow stage")
                time.sleep(0.02)
        server.service.compile = slow
        start = time.monotonic()
        with pytest.raises(grpc.RpcError) as e:
            client.compile(add_graph(), FEEDS, ["y:0"])
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "compile_deadline_s=0.5" in e.value.details() and time.monotonic() - start < 10
        server.service.compile = compile
        assert client.compile(add_graph(), FEEDS, ["y:0"]).id  # the slot is free again


def test_the_compile_deadline_applies_to_the_real_compile():
    with running(compile_deadline_s=1e-9) as server, Client(server.address, timeout=120) as client:
        with pytest.raises(grpc.RpcError) as e:
            client.compile(add_graph(), FEEDS, ["y:0"])
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED and "compile_deadline_s" in e.value.details()


def test_execute_has_its_own_gate(gated):
    server, client, release, _ = gated
    executable = client.compile(add_graph(), FEEDS, ["y:0"])
    execute = server.service.execute
    entered = threading.Event()

    def blocking(*args):
        entered.set()
        release.wait(60)
        return execute(*args)
    server.service.execute = blocking
    request = xlacs_pb2.ExecuteRequest(executable_id=executable.id,
                                       inputs=[tensors.to_proto("x:0", np.ones((2, 3), np.float32))])
    calls = [client.stub.Execute.future(request, timeout=60)]
    assert entered.wait(30)
    calls.append(client.stub.Execute.future(request, timeout=60))
    time.sleep(0.2)
    with pytest.raises(grpc.RpcError) as e:
        client.stub.Execute(request, timeout=60)
    over_limit(e, "execute_queue")
    assert client.compile(add_graph(), FEEDS, ["y:0"]).id  # compiles are not held up by executes
    release.set()
    for call in calls:
        np.testing.assert_array_equal(tensors.from_proto(call.result().outputs[0]), np.full((2, 3), 2, np.float32))


def test_gates_must_leave_a_worker_for_health_checks():
    with pytest.raises(ValueError, match="workers=8 must exceed"):
        Gates(Settings(workers=8, max_concurrent_compiles=2, compile_queue=2, max_concurrent_executes=2,
                       execute_queue=2))


def test_batched_infers_get_the_workers_the_gates_leave_but_one():
    """Infers waiting in dynamic batchers hold transport threads: they get the workers the gated calls leave, less one
    for health checks; the next is refused naming the setting to raise."""
    batched = Gates(Settings(workers=20)).batched  # the default gates admit 14 calls
    assert batched.limit == 5
    with contextlib.ExitStack() as admitted:
        for _ in range(5):
            admitted.enter_context(batched)
        with pytest.raises(LimitExceeded, match="XLACS_WORKERS"):
            batched.__enter__()
    assert batched.inside == 0


def test_limits_come_from_the_environment():
    settings = Settings.from_env({"XLACS_MAX_GRAPH_BYTES": "1000", "XLACS_COMPILE_DEADLINE_S": "2.5",
                                  "XLACS_MAX_TENSOR_ELEMENTS": "99", "XLACS_COMPILE_QUEUE": "0"})
    assert (settings.max_graph_bytes, settings.compile_deadline_s, settings.max_tensor_elements,
            settings.compile_queue) == (1000, 2.5, 99, 0)


def test_a_cache_hit_waits_for_no_slot_and_queue_waits_are_measured(gated):
    server, client, release, held = gated
    cached = compile_future(client, "cached").result()  # compiled before the slot is taken
    holder = compile_future(client, "hold")
    assert held.wait(30)
    request = xlacs_pb2.CompileRequest(graph_def=add_graph(tuple(cached.signature.inputs[0].shape)),
                                       fetches=["y:0"], feeds=[cached.signature.inputs[0]])
    start = time.monotonic()
    hit = client.stub.Compile(request, timeout=30)  # while the only slot is held
    assert time.monotonic() - start < 2 and hit.cache == "l1" and hit.executable_id == cached.executable_id
    queued = compile_future(client, "quick")  # a miss: it waits for the slot
    time.sleep(0.2)
    assert not queued.done()
    release.set()
    assert holder.result().executable_id and queued.result().stage_ms["queue"] > 0
    waits = registry_for(server.service).get_sample_value("xlacs_queue_seconds_count", {"rpc": "Compile"})
    assert waits >= 3


def test_readiness_is_false_while_every_execute_slot_is_stuck_past_its_limit():
    with running(max_concurrent_executes=1, execute_queue=1, execute_deadline_s=0.5) as server, \
            Client(server.address, timeout=120) as client:
        executable = client.compile(add_graph(), FEEDS, ["y:0"])
        execute, release, entered = server.service.execute, threading.Event(), threading.Event()

        def stuck(*args):  # a program run in the daemon that nothing can stop
            entered.set()
            release.wait(60)
            return execute(*args)
        server.service.execute = stuck
        http = HttpServer(create_app(server.service), "127.0.0.1", 0)
        http.start()
        try:
            call = client.stub.Execute.future(xlacs_pb2.ExecuteRequest(
                executable_id=executable.id, inputs=[tensors.to_proto("x:0", np.ones((2, 3), np.float32))]),
                timeout=60)
            assert entered.wait(30)
            assert _wait_for(lambda: not healthy(server.address))  # past 0.5 s, within a poll of readiness
            ready = httpx.get(f"http://127.0.0.1:{http.port}/readyz", timeout=30)
            assert ready.status_code == 503 and "execute_deadline_s=0.5" in ready.json()["status"]
            release.set()
            assert call.result().outputs
            assert _wait_for(lambda: healthy(server.address))
            assert httpx.get(f"http://127.0.0.1:{http.port}/readyz", timeout=30).status_code == 200
        finally:
            release.set()
            http.stop()


def _wait_for(condition, timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _waiter(slots: Slots, name: str, order: list, checkpoint=lambda: None) -> threading.Thread:
    """A thread whose call waits for a slot, started once the one before is in line: returns when this one is in
    line too (its first look at its deadline, SLOT_POLL_S into its wait)."""
    in_line = threading.Event()

    def looks():
        in_line.set()
        checkpoint()

    def wait():
        try:
            slots.acquire(looks)
        except Cancelled:
            order.append(f"{name} left")
            return
        order.append(name)
    thread = threading.Thread(target=wait)
    thread.start()
    assert in_line.wait(10)
    return thread


def _given(order: list, count: int) -> None:
    """Until `count` waiters have had a slot (or left)."""
    deadline = time.monotonic() + 10
    while len(order) < count:
        assert time.monotonic() < deadline, order
        time.sleep(0.01)


def test_slots_go_to_waiting_calls_first_come_first_served():
    """Each waiter looks at its deadline every SLOT_POLL_S and keeps its place in line; a free slot is taken at
    once."""
    slots, order = Slots(1), []
    slots.acquire(lambda: None)
    waiters = [_waiter(slots, name, order) for name in "abcd"]
    for given, _ in enumerate(waiters, start=1):
        slots.release()
        _given(order, given)
    for thread in waiters:
        thread.join(10)
    assert order == list("abcd")
    slots.release()
    slots.acquire(lambda: pytest.fail("a free slot is taken without waiting"))


def test_a_call_that_must_stop_leaves_the_line_and_passes_on_a_slot_given_to_it():
    slots, order, stop = Slots(1), [], threading.Event()

    def checkpoint():
        if stop.is_set():
            raise Cancelled("the client went away")
    slots.acquire(lambda: None)
    leaving = _waiter(slots, "a", order, checkpoint)
    staying = _waiter(slots, "b", order)
    stop.set()
    leaving.join(10)
    assert order == ["a left"]
    slots.release()
    staying.join(10)
    assert order == ["a left", "b"]
    armed = threading.Event()

    def given_then_stopped():  # b's slot goes to c (first in line), whose call then stops
        if armed.is_set():
            slots.release()
            checkpoint()
    given_as_it_leaves = _waiter(slots, "c", order, given_then_stopped)
    last = _waiter(slots, "d", order)
    armed.set()
    given_as_it_leaves.join(10)
    last.join(10)
    assert order[2:] == ["c left", "d"]
