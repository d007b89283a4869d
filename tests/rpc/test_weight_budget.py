"""Weight sets stay within max_weight_bytes: new checkpoints of one architecture evict the least recently used
bindings (counted), the process does not grow with each set, evicted ids are NOT_FOUND and the client
recompiles them transparently, and one graph whose weights alone exceed the budget is RESOURCE_EXHAUSTED."""
import re

import grpc
import httpx
import numpy as np
import pytest
import tensorflow as tf

from tests.security.conftest import running
from xlacs_server.daemon_process import DaemonProcess
from xlacs import Client, freeze, tensors
from xlacs.v1 import xlacs_pb2

WEIGHT_SHAPE = (512, 1024)  # 2 MiB of float32 per checkpoint
SET_BYTES = 4 * 512 * 1024


def checkpoint(seed: int):
    """x @ w for a random w: one architecture, many weight sets."""
    w = tf.constant(np.random.default_rng(seed).standard_normal(WEIGHT_SHAPE).astype(np.float32))
    return freeze(tf.function(lambda x: tf.matmul(x, w)), tf.TensorSpec([1, WEIGHT_SHAPE[0]], tf.float32)), w


def test_weight_sets_are_bounded_by_bytes_least_recently_used_first(tmp_path):
    checkpoints = [checkpoint(seed) for seed in range(24)]
    # The graphs' blobs (their weights as uploaded, docs/cache.md) have a bound of their own: 4 sets' worth here.
    daemon = DaemonProcess(tmp_path / "serve.log", {"XLACS_MAX_WEIGHT_BYTES": str(int(3.5 * SET_BYTES)),
                                                    "XLACS_BLOB_MEMORY_BYTES": str(4 * SET_BYTES),
                                                    "XLACS_CACHE_DIR": ""})
    try:
        with daemon.client(timeout=120) as client:
            x = np.ones((1, WEIGHT_SHAPE[0]), np.float32)
            executables, rss_mib = [], []
            for frozen, w in checkpoints:
                executables.append((client.compile(frozen.graph_def, frozen.feeds, frozen.fetches), w))
                rss_mib.append(daemon.rss_mib())
            metrics = httpx.get(f"http://127.0.0.1:{daemon.http_port}/metrics", timeout=30).text
            assert f"xlacs_weight_evictions_total {24 - 3}.0" in metrics
            resident = float(re.search(r"^xlacs_weight_bytes (\S+)$", metrics, re.M).group(1))
            assert 3 * SET_BYTES <= resident <= 3.5 * SET_BYTES
            # Unbounded, the 20 sets after the first few would add 40 MiB.
            assert rss_mib[-1] - rss_mib[4] < 24 * SET_BYTES / 2 / 2 ** 20, rss_mib

            first, w0 = executables[0]
            with pytest.raises(grpc.RpcError) as e:  # evicted: the raw RPC says so...
                client.stub.Execute(_request(first.id, first.input_names[0], x), timeout=60)
            assert e.value.code() == grpc.StatusCode.NOT_FOUND
            (y,) = first(x)  # ...and the client compiles it again, an L1 hit that uploads its weights
            want = x @ w0.numpy()
            np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    finally:
        assert daemon.stop() == 0


def test_one_graph_whose_weights_exceed_the_budget_is_refused():
    with running(max_weight_bytes=SET_BYTES // 2) as server, Client(server.address, timeout=120) as client:
        frozen, _ = checkpoint(0)
        with pytest.raises(grpc.RpcError) as e:
            client.compile(frozen.graph_def, frozen.feeds, frozen.fetches)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_weight_bytes" in e.value.details()


def _request(executable_id: str, name: str, x: np.ndarray) -> xlacs_pb2.ExecuteRequest:
    request = xlacs_pb2.ExecuteRequest(executable_id=executable_id)
    tensors.fill(request.inputs.add(), name, x)
    return request
