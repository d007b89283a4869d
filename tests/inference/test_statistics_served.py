"""Statistics of served models after real infers on a real daemon: Triton's counts, the failures, the batch sizes,
and the Prometheus series the dashboard's /metrics shows (parsed with prometheus_client's parser), gone on unload."""
import threading

import httpx
import numpy as np
import pytest
from google.protobuf import json_format
from prometheus_client.parser import text_string_to_metric_families

from tests.inference import tritonclient
from tests.model_repository import ModelServer, graphdef_model
from xlacs_server.inference.v2 import grpc_service_pb2
from xlacs_server.errors import InvalidRequest, Unavailable
from xlacs_server.models.served_signature import Background


def scraped(server, model: str, version: str) -> dict[str, float]:
    """The version's samples in the daemon's /metrics, by sample name (a histogram bucket with its le)."""
    text = httpx.get(f"http://{server.http_address}/metrics", timeout=30).raise_for_status().text
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("model") == model and s.labels.get("version") == version:
                found[s.name + (f"{{le={s.labels['le']}}}" if "le" in s.labels else "")] = s.value
    return found


STATS_SCRIPT = """
import tritonclient.{protocol} as client_module
from tritonclient.utils import InferenceServerException
client = client_module.InferenceServerClient(args["url"])
for i, batch in enumerate(args["batches"]):
    given = client_module.InferInput("x", [batch, 4], "FP32")
    given.set_data_from_numpy(arrays[str(i)])
    client.infer(args["model"], [given], model_version="1")
bad = client_module.InferInput("x", [1, 4], "FP64")
bad.set_data_from_numpy(np.zeros((1, 4), np.float64))
try:
    client.infer(args["model"], [bad], model_version="1")
    raise AssertionError("an FP64 input was accepted")
except InferenceServerException as e:
    error = e.message()
reply(result={{"error": error, "stats": client.get_inference_statistics(args["model"], "1", **{as_json})}})
"""


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_protocol_stats_are_the_counts_of_the_requests_a_client_sent(model_server, model_repository, tmp_path,
                                                                         protocol):
    built = model_repository.batching
    served = model_server.models.model(built.name, "1")
    before = served.statistics.snapshot()
    batches = [1, 2, 3, 2]
    arrays = {str(i): built.inputs(batch=b, seed=i)[built.input] for i, b in enumerate(batches)}
    script = STATS_SCRIPT.format(protocol=protocol, as_json='{"as_json": True}' if protocol == "grpc" else "{}")
    address = model_server.http_address if protocol == "http" else model_server.grpc_address
    _, result = tritonclient.run(script, tmp_path, arrays, url=address, model=built.name, batches=batches)
    assert "FP64" in result["error"]
    # The gRPC message's fields and nothing else; as JSON, gRPC's uint64 are strings
    (got,) = json_format.ParseDict(result["stats"], grpc_service_pb2.ModelStatisticsResponse()).model_stats
    assert got == json_format.ParseDict(served.statistics.snapshot(), grpc_service_pb2.ModelStatistics())
    assert got.inference_stats.success.count - before["inference_stats"]["success"]["count"] == 4
    assert got.inference_stats.fail.count - before["inference_stats"]["fail"]["count"] == 1
    assert got.inference_count - before["inference_count"] == sum(batches)
    assert got.execution_count - before["execution_count"] == len(batches)


def test_infers_are_counted_by_request_row_and_batch_size(model_server, model_repository):
    built = model_repository.batching  # keras_gd: max_batch_size 8, no dynamic batcher
    served = model_server.models.model(built.name, "1")
    before, metrics_before = served.statistics.snapshot(), scraped(model_server, built.name, "1")
    batches = [1, 3, 3, 8, 2]
    for seed, batch in enumerate(batches):
        inputs = built.inputs(batch=batch, seed=seed)
        got = served.infer(inputs, None, Background())
        np.testing.assert_allclose(got[built.output], built.expected(inputs)[built.output], rtol=1e-5, atol=1e-5)

    after = served.statistics.snapshot()
    assert (after["name"], after["version"]) == (built.name, "1")
    compute = ("compute_input", "compute_infer", "compute_output")  # Triton's split of a run
    for kind in ("success", "queue", *compute):
        assert after["inference_stats"][kind]["count"] - before["inference_stats"][kind]["count"] == len(batches)
        if kind in compute:  # each part took some time
            assert after["inference_stats"][kind]["ns"] > before["inference_stats"][kind]["ns"], kind
    assert after["inference_stats"]["success"]["ns"] >= sum(after["inference_stats"][k]["ns"] for k in compute)
    assert after["inference_stats"]["fail"] == before["inference_stats"]["fail"]
    assert after["execution_count"] - before["execution_count"] == len(batches)
    assert after["inference_count"] - before["inference_count"] == sum(batches)  # rows, as Triton counts
    runs = {b["batch_size"]: b["compute_infer"]["count"] for b in after["batch_stats"]}
    runs_before = {b["batch_size"]: b["compute_infer"]["count"] for b in before["batch_stats"]}
    assert {size: runs[size] - runs_before.get(size, 0) for size in runs} == {1: 1, 2: 1, 3: 2, 8: 1}
    assert after["last_inference"] >= before["last_inference"] and after["last_inference"] > 0

    metrics_after = scraped(model_server, built.name, "1")
    delta = {name: metrics_after[name] - metrics_before.get(name, 0.0) for name in metrics_after}
    assert delta["xlacs_model_requests_total"] == len(batches)
    assert delta["xlacs_model_queue_seconds_count"] == delta["xlacs_model_compute_seconds_count"] == len(batches)
    assert delta["xlacs_model_batch_size_count"] == len(batches)
    assert delta["xlacs_model_batch_size_sum"] == sum(batches)
    assert delta["xlacs_model_batch_size_bucket{le=2.0}"] == 2  # batches of 1 and 2
    assert delta["xlacs_model_batch_size_bucket{le=4.0}"] == 4
    assert delta.get("xlacs_model_failures_total", 0.0) == 0


def test_bad_requests_are_failures_with_the_last_error(model_server, model_repository):
    built = model_repository.batching
    served = model_server.models.model(built.name, "1")
    before, metrics_before = served.statistics.snapshot(), scraped(model_server, built.name, "1")
    with pytest.raises(InvalidRequest, match="'x'"):
        served.infer({"x": np.zeros((2, 5), np.float32)}, None, Background())  # 5 features, the model takes 4
    assert "'x'" in served.statistics.last_error and "shape" in served.statistics.last_error
    with pytest.raises(InvalidRequest, match="'nope'"):
        served.infer(built.inputs(), ["nope"], Background())
    assert "'nope'" in served.statistics.last_error

    after = served.statistics.snapshot()
    assert after["inference_stats"]["fail"]["count"] - before["inference_stats"]["fail"]["count"] == 2
    assert after["inference_stats"]["success"] == before["inference_stats"]["success"]
    assert after["execution_count"] == before["execution_count"]
    metrics_after = scraped(model_server, built.name, "1")
    assert metrics_after["xlacs_model_failures_total"] - metrics_before.get("xlacs_model_failures_total", 0) == 2
    assert metrics_after["xlacs_model_requests_total"] == metrics_before.get("xlacs_model_requests_total", 0)


def test_a_model_that_failed_to_load_counts_the_requests_it_refused(model_server, model_repository):
    broken = model_server.models.model(model_repository.broken, "1")
    assert broken.state == "UNAVAILABLE"
    with pytest.raises(Unavailable, match=model_repository.broken):
        broken.infer({"x": np.zeros((1, 4), np.float32)}, None, Background())
    assert broken.statistics.snapshot()["inference_stats"]["fail"]["count"] >= 1
    assert broken.reason and broken.reason in broken.statistics.last_error
    assert scraped(model_server, model_repository.broken, "1")["xlacs_model_failures_total"] >= 1


def test_unload_drops_the_series_a_load_starts_them_and_a_reload_keeps_them(tmp_path):
    built = graphdef_model(tmp_path, "stats_unload", versions=(1, 2))  # version 2 served (latest 1)
    with ModelServer(tmp_path) as server:
        served = server.models.model(built.name, "")
        assert served.version == "2"
        served.infer(built.inputs(), None, Background())
        assert scraped(server, built.name, "2")["xlacs_model_requests_total"] == 1

        server.models.unload(built.name)
        assert scraped(server, built.name, "2") == {}
        assert served.statistics.snapshot()["inference_stats"]["success"]["count"] == 1  # Triton's, as it was

        server.models.load(built.name)
        again = server.models.model(built.name, "2")
        assert again is not served
        assert scraped(server, built.name, "2")["xlacs_model_requests_total"] == 0
        again.infer(built.inputs(), None, Background())
        assert scraped(server, built.name, "2")["xlacs_model_requests_total"] == 1
        assert again.statistics.snapshot()["inference_stats"]["success"]["count"] == 1

        server.models.load(built.name)  # loaded again while served: the old load unloads, the series go on
        reloaded = server.models.model(built.name, "2")
        assert reloaded is not again and again.state == "UNLOADING"
        reloaded.infer(built.inputs(), None, Background())
        assert scraped(server, built.name, "2")["xlacs_model_requests_total"] == 2
        assert reloaded.statistics.snapshot()["inference_stats"]["success"]["count"] == 1


def test_the_dynamic_batcher_merges_requests_into_one_run_of_the_batch_size(tmp_path):
    # A delay no test waits out: the batch leaves when its 8 rows (max_batch_size) are queued.
    built = graphdef_model(tmp_path, "stats_batched", max_batch_size=8,
                           extra_config="dynamic_batching { max_queue_delay_microseconds: 60000000 }")
    with ModelServer(tmp_path) as server:
        served = server.models.model(built.name, "1")
        requests = [built.inputs(batch=rows, seed=i) for i, rows in enumerate((1, 1, 2, 1, 3))]  # 8 rows
        outputs = [None] * len(requests)

        def infer(i):
            outputs[i] = served.infer(requests[i], None, Background())
        clients = [threading.Thread(target=infer, args=(i,)) for i in range(len(requests))]
        for c in clients:
            c.start()
        for c in clients:
            c.join(timeout=120)
            assert not c.is_alive()
        for inputs, got in zip(requests, outputs):
            np.testing.assert_allclose(got[built.output], built.expected(inputs)[built.output], rtol=1e-5,
                                       atol=1e-5)

        s = served.statistics.snapshot()
        assert s["inference_stats"]["success"]["count"] == len(requests)
        assert s["execution_count"] == 1 and s["inference_count"] == 8
        assert [(b["batch_size"], b["compute_infer"]["count"]) for b in s["batch_stats"]] == [(8, 1)]
        # The first requests waited in the queue for the rows after them
        assert s["inference_stats"]["queue"]["count"] == len(requests) and s["inference_stats"]["queue"]["ns"] > 0
        assert s["inference_stats"]["compute_infer"]["count"] == len(requests)
        got = scraped(server, built.name, "1")
        assert got["xlacs_model_batch_size_count"] == 1 and got["xlacs_model_batch_size_sum"] == 8
        assert got["xlacs_model_requests_total"] == len(requests)
