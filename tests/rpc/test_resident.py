"""Resident outputs over real gRPC: an Execute keeps outputs on the device under handles, later Executes take the
handles as inputs (a pipeline without round trips, checked against TensorFlow), FetchTensors copies them back,
FreeTensors and the time to live free them, the budgets refuse past them, and bad handles are named."""
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests.security.conftest import running
from xlacs_server.daemon_process import DaemonProcess
from xlacs import Client, ResidentTensor, error_details, freeze, tensors
from xlacs.v1 import xlacs_pb2

MAX_RESIDENT_BYTES = 64 << 10
MAX_RESIDENT_TENSORS = 8
RNG = np.random.default_rng(7)
W1 = RNG.standard_normal((8, 16)).astype(np.float32) / np.sqrt(8)
B1 = RNG.standard_normal(16).astype(np.float32) * 0.1
W2 = RNG.standard_normal((16, 3)).astype(np.float32) / np.sqrt(16)


def encode(x):
    """Stage one: relu(x @ W1 + B1), [4, 8] -> [4, 16]."""
    return tf.nn.relu(tf.matmul(x, W1) + B1)


def classify(h):
    """Stage two: softmax(h @ W2), [4, 16] -> [4, 3]."""
    return tf.nn.softmax(tf.matmul(h, W2))


def two_outputs(x):
    return x * 2.0, tf.reduce_sum(x, axis=1)


def loop(x):
    """A While: its program runs in an execution worker process (isolate_executions="loops")."""
    return tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 1.5 + 1.0), (tf.constant(0), x))[1]


@pytest.fixture(scope="module")
def server():
    with running(max_resident_bytes=MAX_RESIDENT_BYTES, max_resident_tensors=MAX_RESIDENT_TENSORS) as server:
        yield server


@pytest.fixture(scope="module")
def client(server):
    with Client(server.address, timeout=120) as client:
        yield client


@pytest.fixture(autouse=True)
def nothing_resident_after(server):
    yield
    server.service.resident.free([t.handle for t in server.service.resident.tensors()])


def compiled(client, fn, *shapes, dtype=tf.float32, lower_control_flow=True):
    frozen = freeze(tf.function(fn), *[tf.TensorSpec(s, dtype) for s in shapes],
                    lower_control_flow=lower_control_flow)
    return client.compile(frozen.graph_def, frozen.feeds, frozen.fetches)


@pytest.fixture(scope="module")
def stages(client):
    return compiled(client, encode, (4, 8)), compiled(client, classify, (4, 16))


def test_a_two_stage_pipeline_runs_on_handles_and_matches_tensorflow(client, stages):
    first, second = stages
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    received = client.stats().received_bytes["Execute"]
    (h,) = first.execute([x], keep=True)
    assert isinstance(h, ResidentTensor) and h.name == first.output_names[0]
    assert (h.dtype, h.shape, h.nbytes) == (np.dtype(np.float32), (4, 16), 4 * 16 * 4)
    (y,) = second.execute([h])
    want_h = encode(x).numpy()
    assert want_h.std() > 0.1
    np.testing.assert_allclose(y, classify(want_h).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h.fetch(), want_h, rtol=1e-5, atol=1e-6)
    # The second Execute sent a handle, not the tensor's 256 bytes: both requests together are smaller.
    assert client.stats().received_bytes["Execute"] - received < x.nbytes + h.nbytes
    stats = client.stats()
    assert (stats.resident_tensors, stats.resident_bytes) == (1, h.nbytes)


def test_a_handle_feeds_many_executes_and_fetch_does_not_free_it(client, stages):
    first, second = stages
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    (h,) = first.execute({first.input_names[0]: x}, keep=[first.output_names[0]])
    want = classify(encode(x)).numpy()
    for _ in range(3):
        np.testing.assert_allclose(second.execute([h])[0], want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(h.fetch(), encode(x).numpy(), rtol=1e-5, atol=1e-6)
    (kept_y,) = second.execute([h], keep=True)
    values = client.fetch([h, kept_y])
    np.testing.assert_allclose(values[1], want, rtol=1e-5, atol=1e-6)
    assert client.free([h, kept_y]) == (2, h.nbytes + kept_y.nbytes)


def test_only_the_outputs_named_are_kept(client):
    executable = compiled(client, two_outputs, (2, 5))
    x = RNG.standard_normal((2, 5)).astype(np.float32)
    doubled, total = executable.execute([x], keep=[executable.output_names[1]])
    assert isinstance(doubled, np.ndarray) and isinstance(total, ResidentTensor)
    np.testing.assert_allclose(doubled, x * 2, rtol=1e-6)
    np.testing.assert_allclose(total.fetch(), x.sum(axis=1), rtol=1e-5)
    doubled, total = executable.execute([x], keep=executable.output_names[0])  # one name alone
    assert isinstance(doubled, ResidentTensor) and isinstance(total, np.ndarray)
    with pytest.raises(ValueError, match="not outputs"):
        executable.execute([x], keep=["nope:0"])


def test_free_frees_once_and_a_freed_handle_is_not_found_naming_it(client, stages, server):
    first, second = stages
    (h,) = first.execute([np.ones((4, 8), np.float32)], keep=True)
    assert h.free() is True
    assert h.free() is False
    assert server.service.resident.freed >= 1
    with pytest.raises(grpc.RpcError) as e:
        h.fetch()
    assert e.value.code() == grpc.StatusCode.NOT_FOUND and "handles[0]" in e.value.details()
    assert error_details(e.value).reason == "UNKNOWN_HANDLE"
    compiles = client.stats().received_bytes["Compile"]
    with pytest.raises(grpc.RpcError) as e:
        second.execute([h])
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert second.input_names[0] in e.value.details() and h.handle in e.value.details()
    assert client.stats().received_bytes["Compile"] == compiles  # the client did not compile again for it


def test_an_unknown_handle_is_not_found_naming_the_input(client, stages):
    _, second = stages
    request = xlacs_pb2.ExecuteRequest(executable_id=second.id)
    request.inputs.add(name=second.input_names[0], handle="no-such-handle")
    with pytest.raises(grpc.RpcError) as e:
        client.stub.Execute(request, timeout=60)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert "no-such-handle" in e.value.details() and second.input_names[0] in e.value.details()


def test_time_to_live_frees_tensors_by_itself(client, stages, server):
    first, _ = stages
    expired = server.service.resident.expired
    (short,) = first.execute([np.ones((4, 8), np.float32)], keep=True, ttl_s=0.3)
    (default,) = first.execute([np.ones((4, 8), np.float32)], keep=True)
    assert client.stats().resident_tensors == 2
    deadline = time.monotonic() + 10
    while client.stats().resident_tensors != 1:  # the sweeper frees it: nothing looks it up
        assert time.monotonic() < deadline, "the expired tensor was not freed"
        time.sleep(0.05)
    assert server.service.resident.expired == expired + 1
    with pytest.raises(grpc.RpcError) as e:
        short.fetch()
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert default.fetch().shape == (4, 16)


def test_an_expired_handle_is_not_found_before_any_sweep(client, stages):
    first, second = stages
    (h,) = first.execute([np.ones((4, 8), np.float32)], keep=True, ttl_s=0.05)
    time.sleep(0.1)
    with pytest.raises(grpc.RpcError) as e:
        second.execute([h])
    assert e.value.code() == grpc.StatusCode.NOT_FOUND and "time to live" in e.value.details()


@pytest.mark.parametrize("ttl_s", [-1.0, float("nan"), float("inf")])
def test_a_bad_time_to_live_is_invalid_naming_the_output(client, stages, ttl_s):
    first, _ = stages
    with pytest.raises(grpc.RpcError) as e:
        first.execute([np.ones((4, 8), np.float32)], keep=True, ttl_s=ttl_s)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert first.output_names[0] in e.value.details() and "ttl_s" in e.value.details()


@pytest.mark.parametrize("outputs, named", [
    ([xlacs_pb2.OutputRequest(name="nope:0", keep=True)], "nope:0"),
    ([xlacs_pb2.OutputRequest(name="Identity:0", keep=True)] * 2, "kept twice"),
    ([xlacs_pb2.OutputRequest(name="Identity:0", ttl_s=5)], "not keep"),
])
def test_bad_output_requests_are_invalid_naming_the_output(client, stages, outputs, named):
    first, _ = stages
    assert first.output_names == ["Identity:0"]
    request = xlacs_pb2.ExecuteRequest(executable_id=first.id, outputs=outputs)
    tensors.fill(request.inputs.add(), first.input_names[0], np.ones((4, 8), np.float32))
    with pytest.raises(grpc.RpcError) as e:
        client.stub.Execute(request, timeout=60)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and named in e.value.details()


def test_an_executable_with_unknown_dims_keeps_nothing_but_takes_handles(client, stages):
    first, _ = stages
    dynamic = client.compile_function(tf.function(classify), tf.TensorSpec([None, 16], tf.float32))
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    (h,) = first.execute([x], keep=True)
    with pytest.raises(grpc.RpcError) as e:
        dynamic.execute([h], keep=True)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "unknown dims" in e.value.details()
    np.testing.assert_allclose(dynamic.execute([h])[0], classify(encode(x)).numpy(), rtol=1e-5, atol=1e-6)


def test_a_handle_with_bytes_too_is_invalid(client, stages):
    first, second = stages
    (h,) = first.execute([np.ones((4, 8), np.float32)], keep=True)
    request = xlacs_pb2.ExecuteRequest(executable_id=second.id)
    request.inputs.add(name=second.input_names[0], handle=h.handle, content=bytes(h.nbytes))
    with pytest.raises(grpc.RpcError) as e:
        client.stub.Execute(request, timeout=60)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert second.input_names[0] in e.value.details() and "exactly one" in e.value.details()


def test_execute_stream_takes_handles_and_keeps_outputs(client, stages):
    first, second = stages
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    (h,) = first.execute([x], keep=True)
    request = xlacs_pb2.ExecuteRequest(executable_id=second.id, outputs=[
        xlacs_pb2.OutputRequest(name=second.output_names[0], keep=True, ttl_s=60)])
    request.inputs.add(name=second.input_names[0], handle=h.handle)
    (reply,) = client.stub.ExecuteStream(iter([request]), timeout=60)
    (kept,) = reply.outputs
    assert kept.handle and not kept.content and list(kept.shape) == [4, 3] and kept.name == second.output_names[0]
    (fetched,) = client.stub.FetchTensors(xlacs_pb2.FetchTensorsRequest(handles=[kept.handle]), timeout=60).tensors
    assert fetched.name == kept.handle
    np.testing.assert_allclose(tensors.from_proto(fetched), classify(encode(x)).numpy(), rtol=1e-5, atol=1e-6)


def test_a_handle_of_another_shape_or_dtype_is_invalid_naming_the_input(client, stages):
    first, second = stages
    (h,) = first.execute([np.ones((4, 8), np.float32)], keep=True)
    with pytest.raises(grpc.RpcError) as e:
        first.execute([h])  # [4, 16] where [4, 8] is expected
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert first.input_names[0] in e.value.details() and "[4, 16]" in e.value.details()
    ints = compiled(client, lambda x: x * 2, (4, 16), dtype=tf.int32)
    (k,) = ints.execute([np.ones((4, 16), np.int32)], keep=True)
    with pytest.raises(grpc.RpcError) as e:
        second.execute([k])  # int32 where float32 is expected
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert second.input_names[0] in e.value.details() and "int32" in e.value.details()


def test_past_the_byte_budget_nothing_is_kept_and_the_setting_is_named(client, server):
    big = compiled(client, lambda x: x + 1.0, (MAX_RESIDENT_BYTES // 4 // 2 + 1,))
    x = np.zeros(MAX_RESIDENT_BYTES // 4 // 2 + 1, np.float32)
    (first,) = big.execute([x], keep=True)
    with pytest.raises(grpc.RpcError) as e:
        big.execute([x], keep=True)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_resident_bytes" in e.value.details()
    assert error_details(e.value).metadata["setting"] == "max_resident_bytes"
    assert client.stats().resident_bytes == first.nbytes
    first.free()
    (second,) = big.execute([x], keep=True)  # room again
    np.testing.assert_array_equal(second.fetch(), x + 1)


def test_past_the_tensor_budget_the_setting_is_named(client, stages):
    first, _ = stages
    kept = [first.execute([np.ones((4, 8), np.float32)], keep=True)[0] for _ in range(MAX_RESIDENT_TENSORS)]
    with pytest.raises(grpc.RpcError) as e:
        first.execute([np.ones((4, 8), np.float32)], keep=True)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_resident_tensors" in e.value.details()
    assert client.free(kept) == (MAX_RESIDENT_TENSORS, sum(t.nbytes for t in kept))


def test_a_fetch_copies_at_most_the_byte_budget_and_a_call_names_at_most_the_tensor_budget(client):
    size = MAX_RESIDENT_BYTES // 4 // 2 + 1
    big = compiled(client, lambda x: x + 1.0, (size,))
    (kept,) = big.execute([np.zeros(size, np.float32)], keep=True)
    np.testing.assert_array_equal(client.fetch([kept])[0], np.ones(size, np.float32))
    with pytest.raises(grpc.RpcError) as e:
        client.fetch([kept, kept])  # a handle named twice counts twice: over max_resident_bytes
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_resident_bytes" in e.value.details()
    for call in (client.fetch, client.free):
        with pytest.raises(grpc.RpcError) as e:
            call([kept] * (MAX_RESIDENT_TENSORS + 1))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_resident_tensors" in e.value.details()
    assert kept.free()


def test_an_isolated_program_keeps_outputs_and_takes_handles(client, server, stages):
    looped = compiled(client, loop, (4, 16), lower_control_flow=False)
    assert server.service.loaded(looped.id).executable.isolated
    first, second = stages
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    (h,) = first.execute([x], keep=True)
    (g,) = looped.execute([h], keep=True)  # a handle into a worker process, and its output kept
    (y,) = second.execute([g])
    want = classify(loop(encode(x))).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_a_handle_on_another_device_is_copied_device_to_device(tmp_path):
    """Two CPU devices (XLA's host device count): a tensor kept by a program on cpu:0 feeds one on cpu:1."""
    daemon = DaemonProcess(tmp_path / "serve.log", {"XLA_FLAGS": "--xla_force_host_platform_device_count=2",
                                                    "XLACS_CACHE_DIR": ""})
    try:
        with daemon.client(timeout=120) as client:
            frozen = [freeze(tf.function(fn), tf.TensorSpec(shape, tf.float32))
                      for fn, shape in ((encode, (4, 8)), (classify, (4, 16)))]
            first = client.compile(frozen[0].graph_def, frozen[0].feeds, frozen[0].fetches, device="cpu:0")
            second = client.compile(frozen[1].graph_def, frozen[1].feeds, frozen[1].fetches, device="cpu:1")
            assert second.id.endswith("@cpu:1")
            x = RNG.standard_normal((4, 8)).astype(np.float32)
            (h,) = first.execute([x], keep=True)
            (y,) = second.execute([h])
            np.testing.assert_allclose(y, classify(encode(x)).numpy(), rtol=1e-5, atol=1e-6)
            assert client.stats().resident_tensors == 1  # the copy on cpu:1 was the run's alone
    finally:
        daemon.stop()
