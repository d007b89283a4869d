"""Concurrent tritonclient.grpc requests to a dynamic-batching model: each waits in the batcher holding one of the gRPC
server's threads, so the threads of `workers` (also its maximum_concurrent_rpcs) that the gated calls leave, but one
for health checks, bound how many clients wait at once (gates.py, Gates.batched)."""
from __future__ import annotations

import numpy as np

from tests.inference import tritonclient
from tests.model_repository import ModelServer, graphdef_model

CONCURRENT = '''
import queue
import tritonclient.grpc as grpcclient
client = grpcclient.InferenceServerClient(args["url"])
answers = queue.Queue()
for i in range(args["requests"]):
    given = grpcclient.InferInput("x", [1, 4], "FP32")
    given.set_data_from_numpy(arrays[str(i)])
    client.async_infer("gd", [given], callback=lambda result, error, i=i: answers.put((i, result, error)),
                       request_id=str(i))
outputs, failures = {}, {}
for _ in range(args["requests"]):
    i, result, error = answers.get(timeout=ANSWER_S)
    if error is None:
        outputs[str(i)] = result.as_numpy("Identity")
    else:
        failures[str(i)] = [error.status(), error.message()]
timed_out = None
if args["timeout_us"]:
    given = grpcclient.InferInput("x", [1, 4], "FP32")
    given.set_data_from_numpy(arrays["0"])
    try:
        client.infer("gd", [given], timeout=args["timeout_us"])
    except grpcclient.InferenceServerException as e:
        timed_out = [e.status(), e.message()]
reply(arrays=outputs, result={"failures": failures, "timed_out": timed_out,
                              "stats": client.get_inference_statistics("gd", as_json=True)["model_stats"][0]})
'''

STREAM = '''
import queue
import tritonclient.grpc as grpcclient
client = grpcclient.InferenceServerClient(args["url"])
answers = queue.Queue()
client.start_stream(callback=lambda result, error: answers.put((result, error)))
for i in range(args["requests"]):
    given = grpcclient.InferInput("x", [1, 4], "FP32")
    given.set_data_from_numpy(arrays[str(i)])
    client.async_stream_infer("gd", [given], request_id=str(i))
outputs, order = {}, []
for _ in range(args["requests"]):
    result, error = answers.get(timeout=ANSWER_S)
    assert error is None, error
    order.append(result.get_response().id)
    outputs[order[-1]] = result.as_numpy("Identity")
client.stop_stream()
reply(arrays=outputs, result={"order": order,
                              "stats": client.get_inference_statistics("gd", as_json=True)["model_stats"][0]})
'''


def serve_batching(tmp_path, delay_us: int):
    built = graphdef_model(tmp_path / "models", "gd", max_batch_size=8, extra_config=f"""
        dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}
        """)
    return built, [built.inputs(batch=1, seed=i) for i in range(16)]


def test_concurrent_clients_within_workers_are_merged(tmp_path):
    """Sixteen clients at once, workers 31 (the default gates' 14 calls, 16 batched infers and one thread left for
    health checks): all wait in the batcher together, which merges them into fewer runs than requests, each
    answered with its own rows."""
    built, inputs = serve_batching(tmp_path, 2_000_000)
    with ModelServer(tmp_path / "models", workers=31) as server:
        got, result = tritonclient.run(CONCURRENT, tmp_path / "client",
                                       {str(i): x["x"] for i, x in enumerate(inputs)}, url=server.grpc_address,
                                       requests=16, timeout_us=0)
    assert result["failures"] == {}
    for i, x in enumerate(inputs):
        np.testing.assert_allclose(got[str(i)], built.expected(x)["Identity"], rtol=1e-5, atol=1e-5)
    stats = result["stats"]
    assert int(stats["inference_count"]) == 16 and int(stats["execution_count"]) < 16
    assert max(int(b["batch_size"]) for b in stats["batch_stats"]) > 1


def test_clients_beyond_workers_are_refused_and_the_timeout_parameter_leaves_the_queue(tmp_path):
    """Workers 14 with gates of 6 calls: seven threads for batched infers, one for health checks. With a batch that
    waits 5 s for its eighth row, seven requests wait in the batcher, and the three sent meanwhile are refused
    RESOURCE_EXHAUSTED at once, naming the setting to raise. A request whose "timeout" parameter passes while it
    queues ends DEADLINE_EXCEEDED. All four are failures in the model's statistics."""
    built, inputs = serve_batching(tmp_path, 5_000_000)
    gates = {"max_concurrent_compiles": 1, "compile_queue": 1, "max_concurrent_executes": 2, "execute_queue": 2}
    with ModelServer(tmp_path / "models", workers=14, **gates) as server:
        got, result = tritonclient.run(CONCURRENT, tmp_path / "client",
                                       {str(i): x["x"] for i, x in enumerate(inputs[:10])}, url=server.grpc_address,
                                       requests=10, timeout_us=200_000)
    assert len(got) == 7 and len(result["failures"]) == 3
    assert {status for status, _ in result["failures"].values()} == {"StatusCode.RESOURCE_EXHAUSTED"}
    assert all("XLACS_WORKERS" in message for _, message in result["failures"].values())
    for i, y in got.items():
        np.testing.assert_allclose(y, built.expected(inputs[int(i)])["Identity"], rtol=1e-5, atol=1e-5)
    status, message = result["timed_out"]
    assert status == "StatusCode.DEADLINE_EXCEEDED" and "deadline passed" in message and "batch queue" in message
    stats = result["stats"]
    assert int(stats["inference_stats"]["success"]["count"]) == 7
    assert int(stats["inference_stats"]["fail"]["count"]) == 4


def test_one_streams_requests_are_merged_and_answered_in_order(tmp_path):
    """Sixteen requests on one ModelStreamInfer stream run as they come (a batch waits up to 2 s for its eighth row):
    the batcher merges them into fewer runs than requests, and the answers come back in the order sent, each with
    its own rows. Run one after another, each would wait 2 s alone."""
    built, inputs = serve_batching(tmp_path, 2_000_000)
    with ModelServer(tmp_path / "models", workers=31) as server:
        got, result = tritonclient.run(STREAM, tmp_path / "client", {str(i): x["x"] for i, x in enumerate(inputs)},
                                       url=server.grpc_address, requests=16)
    assert result["order"] == [str(i) for i in range(16)]
    for i, x in enumerate(inputs):
        np.testing.assert_allclose(got[str(i)], built.expected(x)["Identity"], rtol=1e-5, atol=1e-5)
    stats = result["stats"]
    assert int(stats["inference_count"]) == 16 and int(stats["execution_count"]) < 16
    assert max(int(b["batch_size"]) for b in stats["batch_stats"]) > 1
