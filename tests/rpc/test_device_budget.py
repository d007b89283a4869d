"""Device memory (max_device_bytes, execute/device_budget.py): the weights, resident tensors and variable states on one
device count together against its budget; past it a bind evicts that device's least recently used weights, and
whatever still does not fit is RESOURCE_EXHAUSTED naming the setting, the device and the bytes, while no resident
tensor or state is ever dropped. XLA's own allocation failure is RESOURCE_EXHAUSTED naming the device and the
setting, and the daemon serves on."""
import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests.rpc.test_weight_budget import SET_BYTES, WEIGHT_SHAPE, checkpoint
from tests.security.conftest import running
from xlacs import Client, freeze
from xlacs.v1 import xlacs_pb2

OUTPUT_BYTES = 4 * WEIGHT_SHAPE[1]  # x @ w for one row
STATE = {"v": np.zeros(1 << 14, np.float32)}  # 64 KiB
STATE_BYTES = 1 << 16
BUDGET = SET_BYTES + STATE_BYTES  # one weight set and the state, or one weight set and an output
X = np.ones((1, WEIGHT_SHAPE[0]), np.float32)


def refused(call) -> str:
    """The details of the RESOURCE_EXHAUSTED that `call()` answers."""
    with pytest.raises(grpc.RpcError) as e:
        call()
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
    return e.value.details()


def compile_checkpoint(client, seed: int):
    frozen, _ = checkpoint(seed)
    return client.compile(frozen.graph_def, frozen.feeds, frozen.fetches)


def test_weights_resident_tensors_and_a_state_count_together_on_a_device():
    with running(max_device_bytes=BUDGET, cache_dir="") as server, Client(server.address, timeout=120) as client:
        budget = server.service.budget
        executable = compile_checkpoint(client, 0)
        (kept,) = executable.execute([X], keep=True)
        assert budget.used("cpu:0") == {"weights": SET_BYTES, "resident": OUTPUT_BYTES, "states": 0}

        message = refused(lambda: client.create_state(STATE))
        assert "max_device_bytes=%d" % BUDGET in message and "XLACS_MAX_DEVICE_BYTES" in message
        assert (f"asks {STATE_BYTES} bytes of cpu:0, which holds {SET_BYTES + OUTPUT_BYTES}: {SET_BYTES} of weights, "
                f"{OUTPUT_BYTES} of resident tensors, 0 of variable states") in message
        assert budget.used("cpu:0")["states"] == 0  # nothing copied

        assert kept.free()
        with client.create_state(STATE) as state:  # the output's room was what it lacked: now it fits, exactly
            assert budget.used("cpu:0") == {"weights": SET_BYTES, "resident": 0, "states": STATE_BYTES}
            message = refused(lambda: executable.execute([X], keep=True))
            assert "keeping 1 output(s)" in message and "max_device_bytes" in message
            assert budget.used("cpu:0")["resident"] == 0
            (y,) = executable(X)  # the binding stays, and runs
            assert y.shape == (1, WEIGHT_SHAPE[1])
            np.testing.assert_array_equal(state.read()["v"], STATE["v"])
        assert budget.used("cpu:0") == {"weights": SET_BYTES, "resident": 0, "states": 0}


def test_a_bind_evicts_the_device_s_least_recently_used_weights_but_never_a_state():
    with running(max_device_bytes=BUDGET, cache_dir="") as server, Client(server.address, timeout=120) as client:
        budget = server.service.budget
        with client.create_state(STATE) as state:
            first = compile_checkpoint(client, 0)
            second = compile_checkpoint(client, 1)  # evicts the first: a state is never evicted
            assert budget.used("cpu:0") == {"weights": SET_BYTES, "resident": 0, "states": STATE_BYTES}
            request = xlacs_pb2.ExecuteRequest(executable_id=first.id)
            with pytest.raises(grpc.RpcError) as e:
                client.stub.Execute(request, timeout=60)
            assert e.value.code() == grpc.StatusCode.NOT_FOUND

            w = tf.constant(np.ones((WEIGHT_SHAPE[0], 2 * WEIGHT_SHAPE[1]), np.float32))  # 4 MiB: never fits
            larger = freeze(tf.function(lambda x: tf.matmul(x, w)), tf.TensorSpec([1, WEIGHT_SHAPE[0]], tf.float32))
            message = refused(lambda: client.compile(larger.graph_def, larger.feeds, larger.fetches))
            assert f"asks {2 * SET_BYTES} bytes of cpu:0" in message and "max_device_bytes" in message
            assert second(X)[0].shape == (1, WEIGHT_SHAPE[1])  # refused without evicting anything
            np.testing.assert_array_equal(state.read()["v"], STATE["v"])


def test_an_allocation_xla_fails_is_resource_exhausted_naming_the_device_and_the_budget():
    # 2^46 float32 elements (256 TiB) are past any machine's address space: XLA:CPU's allocator fails, whatever the
    # kernel's overcommit policy.
    elements = 1 << 46
    huge = freeze(tf.function(lambda x: tf.broadcast_to(x, [elements])), tf.TensorSpec([], tf.float32))
    with running(max_tensor_elements=elements, cache_dir="") as server, \
            Client(server.address, timeout=120) as client:
        executable = client.compile(huge.graph_def, huge.feeds, huge.fetches)
        message = refused(lambda: executable(np.float32(1)))
        assert message.startswith(f"running executable {executable.id}: cpu:0 is out of memory (RESOURCE_EXHAUSTED")
        assert f"lower max_device_bytes={server.service.budget.limits['cpu:0']}" in message
        (y,) = compile_checkpoint(client, 0)(X)  # the daemon serves on
        assert y.shape == (1, WEIGHT_SHAPE[1])
