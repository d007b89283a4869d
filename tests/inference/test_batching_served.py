"""Dynamic batching on a real daemon, driven by NVIDIA's tritonclient over HTTP: concurrent requests merge into one
run whose rows match TensorFlow's, the protocol's stats count the batch, and a full queue is the protocol's 429."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from tests.inference import tritonclient
from tests.model_repository import ModelServer, graphdef_model

DELAY_S = 600  # longer than any test: a batch leaves because it is full, never because the delay passed
WAIT_S = 120
QUEUED_TIMEOUT_S = 12  # long enough for the refused request's client process to start and be answered meanwhile

CONCURRENT = """
import threading
import tritonclient.http as http
outputs, errors = {}, []
def send(i, batch):
    client = http.InferenceServerClient(args["url"], network_timeout=args["wait_s"])
    given = http.InferInput("x", [batch, 4], "FP32")
    given.set_data_from_numpy(arrays[str(i)], binary_data=True)
    try:
        outputs[str(i)] = client.infer(args["model"], [given]).as_numpy("Identity")
    except Exception as e:
        errors.append(str(e))
threads = [threading.Thread(target=send, args=(i, b)) for i, b in enumerate(args["batches"])]
for t in threads:
    t.start()
for t in threads:
    t.join()
reply(arrays=outputs, result={"errors": errors})
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("batched")
    batching = f"dynamic_batching {{ max_queue_delay_microseconds: {DELAY_S * 10**6} }}"
    graphdef_model(repo, "bounded", max_batch_size=8, extra_config=batching.replace(
        " }", " default_queue_policy { max_queue_size: 2 } }"))
    built = graphdef_model(repo, "batched", max_batch_size=8, extra_config=batching)
    with ModelServer(repo) as server:
        yield server, built


def test_concurrent_requests_run_as_one_batch_whose_rows_are_tf_s(server, tmp_path):
    server, built = server
    served = server.models.model(built.name)
    before = served.statistics.snapshot()
    batches = [1, 3, 2, 2]  # 8 rows: max_batch_size, a full batch
    arrays = {str(i): built.inputs(batch=b, seed=i)[built.input] for i, b in enumerate(batches)}
    got, result = tritonclient.run(CONCURRENT, tmp_path, arrays, url=server.http_address, model=built.name,
                                   batches=batches, wait_s=WAIT_S)
    assert result["errors"] == []
    for key, array in arrays.items():
        np.testing.assert_allclose(got[key], built.expected({built.input: array})[built.output], rtol=1e-5,
                                   atol=1e-5)
    after = served.statistics.snapshot()
    assert after["execution_count"] - before["execution_count"] == 1
    assert after["inference_count"] - before["inference_count"] == 8
    assert [b["batch_size"] for b in after["batch_stats"]] == [8]
    assert after["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"] == 4


def test_a_request_past_max_queue_size_is_429_naming_the_setting_and_the_queued_leave_at_their_timeout(
        server, tmp_path):
    server, built = server
    served = server.models.model("bounded")
    arrays = {str(i): built.inputs(batch=1, seed=i)[built.input] for i in range(2)}
    waiting = {}
    # Two one-row requests queue (their batch is not full) until their timeout parameter ends them.
    queued = threading.Thread(target=lambda: waiting.update(result=tritonclient.run(
        CONCURRENT.replace("client.infer(args[\"model\"], [given])",
                           "client.infer(args[\"model\"], [given], timeout=args[\"timeout_us\"])"),
        tmp_path / "queued", arrays, url=server.http_address, model="bounded", batches=[1, 1], wait_s=WAIT_S,
        timeout_us=QUEUED_TIMEOUT_S * 10**6)[1]))
    queued.start()
    event = threading.Event()
    for _ in range(WAIT_S * 10):
        if served.batcher.queued == 2:
            break
        event.wait(0.1)
    assert served.batcher.queued == 2
    _, result = tritonclient.run(CONCURRENT, tmp_path / "refused", {"0": arrays["0"]}, url=server.http_address,
                                 model="bounded", batches=[1], wait_s=WAIT_S)
    (refused,) = result["errors"]
    assert "max_queue_size=2" in refused and "429" in refused
    queued.join(WAIT_S)
    assert not queued.is_alive()
    errors = waiting["result"]["errors"]
    assert len(errors) == 2 and all("deadline" in e for e in errors), errors
    assert served.batcher.queued == 0
