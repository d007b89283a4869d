"""Variable states over real gRPC (docs/training.md): steps update the variables in place on the device, steps on
one state never interleave, states are independent and bounded, and every refusal names what to fix."""
import concurrent.futures

import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import RunningServer
from xlacs import Client, dtypes, error_details, unfrozen
from xlacs.v1 import xlacs_pb2
from xlacs_server.config import Settings
from xlacs_server.daemon_process import DaemonProcess


def accumulator(shape=(2,)):
    """A TF1 graph: w (a VarHandleOp) += x, fetching the new w, and scale (read only) * x."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, shape, name="x")
        w = tf.compat.v1.get_variable("w", shape=shape, dtype=tf.float32, use_resource=True)
        scale = tf.compat.v1.get_variable("scale", shape=shape, dtype=tf.float32, use_resource=True)
        tf.identity(w.assign_add(x), name="added")
        tf.identity(scale.read_value() * x, name="scaled")
    return g


def compile_accumulator(client, shape=(2,), device=""):
    executable = client.compile(accumulator(shape).as_graph_def(), {"x:0": ("float32", shape)},
                                ["added:0", "scaled:0"], device=device)
    assert sorted(executable.input_names) == ["variables/scale", "variables/w", "x:0"]
    assert executable.output_names == ["added:0", "scaled:0", "variables/w"]
    return executable


def values(shape=(2,), w=0.0, scale=2.0):
    return {"w": np.full(shape, w, np.float32), "scale": np.full(shape, scale, np.float32)}


def test_a_step_updates_the_state_in_place(client, server):
    executable = compile_accumulator(client)
    assert "tf.aliasing_output" in server.service.loaded(executable.id).executable.stablehlo  # w's input donated
    with client.create_state(values()) as state:
        held = server.service.states.get(state.id)
        before_w, before_scale = held.variables["w"], held.variables["scale"]
        added, scaled = executable(np.array([1, 2], np.float32), state=state)
        np.testing.assert_array_equal(added, [1, 2])
        np.testing.assert_array_equal(scaled, [2, 4])
        assert before_w.is_deleted()  # its buffer became the new w: no copy of the model
        assert held.variables["scale"] is before_scale and not before_scale.is_deleted()  # not assigned: untouched
        executable(np.array([10, 10], np.float32), state=state)
        read = state.read()
        np.testing.assert_array_equal(read["w"], [11, 12])
        np.testing.assert_array_equal(read["scale"], [2, 2])
        assert state.read("w").keys() == {"w"}
        assert held.steps == 2


def test_a_resident_tensor_fed_as_a_variable_survives_the_donation(client):
    """Without a state the variables come from the request; a resident tensor given for one is copied, not
    consumed."""
    executable = compile_accumulator(client)
    first = executable.execute({"x:0": np.ones(2, np.float32), "variables/w": np.zeros(2, np.float32),
                                "variables/scale": np.ones(2, np.float32)}, keep=["variables/w"])
    kept = first[2]
    for _ in range(2):
        outputs = executable.execute({"x:0": np.ones(2, np.float32), "variables/w": kept,
                                      "variables/scale": np.ones(2, np.float32)})
        np.testing.assert_array_equal(outputs[2], [2, 2])
    np.testing.assert_array_equal(kept.fetch(), [1, 1])
    kept.free()


def test_steps_on_one_state_never_interleave_and_states_are_independent(client):
    executable = compile_accumulator(client)
    steps = 40
    with client.create_state(values()) as shared, client.create_state(values(w=100.0)) as other:
        def run(state, x):
            for _ in range(steps):
                executable(np.full(2, x, np.float32), state=state)

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            done = [pool.submit(run, shared, 1.0), pool.submit(run, shared, 2.0), pool.submit(run, other, -1.0)]
            for f in done:
                f.result(timeout=300)
        np.testing.assert_array_equal(shared.read("w")["w"], [3 * steps] * 2)  # no step lost
        np.testing.assert_array_equal(other.read("w")["w"], [100 - steps] * 2)


def refusal(call, code) -> str:
    with pytest.raises(grpc.RpcError) as e:
        call()
    assert e.value.code() == code, e.value.details()
    return e.value.details()


def test_refusals_name_what_to_fix(client):
    executable = compile_accumulator(client)
    x = np.ones(2, np.float32)
    with client.create_state({"w": np.zeros(2, np.float32)}) as partial:
        message = refusal(lambda: executable(x, state=partial), grpc.StatusCode.INVALID_ARGUMENT)
        assert "'scale'" in message and "holds only ['w']" in message
    with client.create_state(values(shape=(3,))) as wrong_shape:
        message = refusal(lambda: executable(x, state=wrong_shape), grpc.StatusCode.INVALID_ARGUMENT)
        assert "variable 'w'" in message and "holds float32[3]" in message
    with client.create_state({"w": np.zeros(2, np.int32), "scale": np.ones(2, np.float32)}) as wrong_dtype:
        message = refusal(lambda: executable(x, state=wrong_dtype), grpc.StatusCode.INVALID_ARGUMENT)
        assert "variable 'w'" in message and "int32" in message
    with client.create_state(values()) as state:
        message = refusal(lambda: executable.execute({"x:0": x, "variables/w": x}, state=state),
                          grpc.StatusCode.INVALID_ARGUMENT)
        assert "'variables/w'" in message and "send only the feeds" in message
        message = refusal(lambda: executable.execute([x], state=state, keep=["variables/w"]),
                          grpc.StatusCode.INVALID_ARGUMENT)
        assert "ReadVariables" in message
        assert "'nope'" in refusal(lambda: state.read("nope"), grpc.StatusCode.INVALID_ARGUMENT)
        gone = state.id
    assert client.stats().states == 0
    state.id = gone  # deleted when the block ended
    for call in (lambda: executable(x, state=state), state.read, state.delete):
        message = refusal(call, grpc.StatusCode.NOT_FOUND)
        assert "create it again" in message
    with pytest.raises(grpc.RpcError) as e:
        state.read()
    assert error_details(e.value).reason == "UNKNOWN_STATE"
    assert "variables/" in refusal(lambda: client.create_state({"variables/w": x}), grpc.StatusCode.INVALID_ARGUMENT)
    assert "names no variable" in refusal(lambda: client.create_state({}), grpc.StatusCode.INVALID_ARGUMENT)


def test_states_stay_within_their_budget(tmp_path):
    running = RunningServer(Settings(cache_dir=str(tmp_path / "cache"), max_states=2, max_state_bytes=64))
    try:
        with Client(running.address, timeout=120) as client:
            first = client.create_state({"a": np.zeros(8, np.float32)})  # 32 bytes
            message = refusal(lambda: client.create_state({"b": np.zeros(9, np.float32)}),
                              grpc.StatusCode.RESOURCE_EXHAUSTED)
            assert "max_state_bytes=64" in message and "XLACS_MAX_STATE_BYTES" in message
            second = client.create_state({"b": np.zeros(8, np.float32)})
            message = refusal(lambda: client.create_state({"c": np.zeros(1, np.float32)}),
                              grpc.StatusCode.RESOURCE_EXHAUSTED)
            assert "max_states=2" in message
            stats = client.stats()
            assert (stats.states, stats.state_bytes) == (2, 64)
            assert first.delete() == 32
            client.create_state({"c": np.zeros(1, np.float32)})
            assert second.delete() == 32
            assert (client.stats().states, client.stats().state_bytes) == (1, 4)
    finally:
        running.stop()


def test_a_state_starts_from_a_checkpoint_or_a_saved_model(client, tmp_path):
    executable = compile_accumulator(client)
    w = tf.Variable(np.array([5, 6], np.float32), name="w")
    scale = tf.Variable(np.array([3, 3], np.float32), name="scale")
    prefix = tf.train.Checkpoint(w=w, scale=scale).write(str(tmp_path / "ckpt" / "model"))
    names = {"w": "w/.ATTRIBUTES/VARIABLE_VALUE", "scale": "scale/.ATTRIBUTES/VARIABLE_VALUE"}
    with client.create_state(prefix, names=names) as state:
        added, scaled = executable(np.ones(2, np.float32), state=state)
        np.testing.assert_array_equal(added, [6, 7])
        np.testing.assert_array_equal(scaled, [3, 3])
    module = tf.Module()
    module.w, module.scale = w, scale
    module.read = tf.function(lambda: w + 0, input_signature=[])
    tf.saved_model.save(module, str(tmp_path / "saved"))
    with client.create_state(tmp_path / "saved") as state:
        assert set(state.variables) == {"w", "scale"}
        added, _ = executable(np.ones(2, np.float32), state=state)
        np.testing.assert_array_equal(added, [6, 7])
    with pytest.raises(KeyError, match="'nope'"):
        client.create_state(prefix, names={"w": "nope"})


def test_a_state_on_another_device_is_refused_naming_both(tmp_path):
    daemon = DaemonProcess(tmp_path / "serve.log", {"XLA_FLAGS": "--xla_force_host_platform_device_count=2",
                                                    "XLACS_CACHE_DIR": ""})
    try:
        with daemon.client(timeout=120) as client:
            executable = compile_accumulator(client, device="cpu:1")
            with client.create_state(values(), device="cpu:0") as state:
                message = refusal(lambda: executable(np.ones(2, np.float32), state=state),
                                  grpc.StatusCode.INVALID_ARGUMENT)
                assert "cpu:0" in message and "cpu:1" in message and "CreateStateRequest.device" in message
            with client.create_state(values(), device="cpu:1") as state:
                added, _ = executable(np.ones(2, np.float32), state=state)
                np.testing.assert_array_equal(added, [1, 1])
    finally:
        daemon.stop()


def test_an_executable_from_the_cache_still_updates_in_place(tmp_path):
    """The donation is part of the serialized program: a daemon that loads the step from the disk tier compiles
    nothing and still updates the state in place."""
    for restart in range(2):
        running = RunningServer(Settings(cache_dir=str(tmp_path / "cache")))
        try:
            with Client(running.address, timeout=120) as client:
                executable = compile_accumulator(client)
                assert (executable.cache == "miss") == (restart == 0), executable.cache
                with client.create_state(values()) as state:
                    before = running.service.states.get(state.id).variables["w"]
                    executable(np.ones(2, np.float32), state=state)
                    added, _ = executable(np.ones(2, np.float32), state=state)
                    np.testing.assert_array_equal(added, [2, 2])
                    assert before.is_deleted()
        finally:
            running.stop()


def test_a_step_with_a_loop_runs_on_a_state_in_an_execution_worker(client, server):
    total = tf.Variable(np.zeros(2, np.float32))

    @tf.function
    def step(x):
        summed = tf.while_loop(lambda i, acc: i < 3, lambda i, acc: (i + 1, acc + x), [0, tf.zeros(2)])[1]
        total.assign_add(summed)
        return summed

    graph = unfrozen(step, tf.TensorSpec([2], tf.float32))
    executable = client.compile(graph.graph_def, graph.feeds, graph.fetches)
    assert server.service.loaded(executable.id).executable.isolated
    with client.create_state(graph.values()) as state:
        for _ in range(2):
            (summed,) = executable(np.array([1, 2], np.float32), state=state)
            np.testing.assert_array_equal(summed, [3, 6])
        (read,) = state.read().values()
        np.testing.assert_array_equal(read, [6, 12])


def test_create_state_refuses_malformed_variables_naming_them(client):
    def create(*tensors):
        return lambda: client.stub.CreateState(xlacs_pb2.CreateStateRequest(variables=tensors))
    good = xlacs_pb2.Tensor(name="w", dtype=dtypes.from_numpy(np.float32), shape=[2], content=bytes(8))
    short = xlacs_pb2.Tensor(name="w", dtype=dtypes.from_numpy(np.float32), shape=[2], content=bytes(7))
    assert "'w'" in refusal(create(short), grpc.StatusCode.INVALID_ARGUMENT)
    assert "more than once" in refusal(create(good, good), grpc.StatusCode.INVALID_ARGUMENT)
    by_handle = xlacs_pb2.Tensor(name="w", dtype=dtypes.from_numpy(np.float32), shape=[2], handle="h")
    assert "as their bytes" in refusal(create(by_handle), grpc.StatusCode.INVALID_ARGUMENT)
    assert "not served" in refusal(lambda: client.create_state(values(), device="cpu:7"),
                                   grpc.StatusCode.FAILED_PRECONDITION)
    assert client.stats().states == 0


def test_a_state_whose_buffers_a_failed_step_consumed_says_so(client, server):
    """A step that fails after its program took the donated buffers leaves the state without them (here the buffer
    is deleted by hand, as such a failure leaves it): the next step is FAILED_PRECONDITION naming the variable, and
    the state can still be deleted."""
    executable = compile_accumulator(client)
    with client.create_state(values()) as state:
        server.service.states.get(state.id).variables["w"].delete()
        message = refusal(lambda: executable(np.ones(2, np.float32), state=state), grpc.StatusCode.FAILED_PRECONDITION)
        assert "'w'" in message and "create it again" in message
        assert "'w'" in refusal(state.read, grpc.StatusCode.FAILED_PRECONDITION)
