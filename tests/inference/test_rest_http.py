"""The protocol's REST endpoints with a plain HTTP client (httpx), where tritonclient hides what the server sent: the
status codes and error objects, the headers of binary data, raw binary bodies, the body limit, the daemon's tokens
and its errors page."""
from __future__ import annotations

import contextlib
import gzip
import json
import socket
import time
import types

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.model_repository import ModelServer, graphdef_model
from xlacs_server.config import Settings
from xlacs_server.dashboard import create_app
from xlacs_server.dashboard.http import HttpServer
from xlacs_server.gates import Call
from xlacs_server.daemon import Daemon

TOKEN = "rest-test-token"
MAX_INPUT_BYTES = 4096


@pytest.fixture(scope="module")
def server(model_repository):
    with ModelServer(model_repository.path, auth_tokens=(TOKEN,), max_input_bytes=MAX_INPUT_BYTES) as server:
        yield server


@pytest.fixture
def http(server):
    with httpx.Client(base_url=f"http://{server.http_address}", timeout=120,
                      headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        yield client


def infer_json(built, batch: int = 2, **extra) -> dict:
    x = built.inputs(batch=batch)[built.input]
    return {"inputs": [{"name": built.input, "shape": list(x.shape), "datatype": "FP32", "data": x.tolist()}],
            **extra}


@pytest.mark.parametrize("path, status, says", [
    ("/v2/models/nope", 404, "no model 'nope'"),
    ("/v2/models/keras_gd/versions/3", 404, "has no version '3'"),
    ("/v2/models/keras_gd/versions/3/ready", 404, "has no version '3'"),
    ("/v2/models/nope/config", 404, "no model 'nope'"),
    ("/v2/models/nope/stats", 404, "no model 'nope'"),
    ("/v2/models/broken", 503, "version 1 UNAVAILABLE: graph_def is not a serialized"),
    ("/v2/models/broken/ready", 503, "has no version ready"),
    ("/v2/models/broken/versions/1/config", 503, "is UNAVAILABLE: graph_def is not"),
    ("/v2/systemsharedmemory/status", 501, "xlacs's shared memory is its own API"),
    ("/v2/cudasharedmemory/region/r/register", 501, "xlacs's shared memory is its own API"),
    ("/v2/trace/setting", 501, "no request tracing"),
    ("/v2/models/keras_gd/trace/setting", 501, "no request tracing"),
    ("/v2/logging", 501, "standard error"),
    ("/v2/models/keras_gd/generate", 501, "no generate extension"),
    ("/v2/models/keras_gd/infer", 404, "serves no GET /v2/models/keras_gd/infer"),
    ("/v2/nothing/here", 404, "serves no GET /v2/nothing/here"),
])
def test_errors_are_the_protocols_error_object_with_the_status_of_their_kind(http, path, status, says):
    answer = http.get(path)
    assert answer.status_code == status and answer.headers["content-type"] == "application/json"
    assert says in answer.json()["error"], answer.json()


@pytest.mark.parametrize("mistake, says", [
    (lambda r: r["inputs"][0].update(name="z"), "has no input 'z'"),
    (lambda r: r["inputs"][0].update(shape=[4, 2]), "input 'x' has shape [4, 2]"),
    (lambda r: r["inputs"][0].update(datatype="FP64"), "input 'x' has datatype FP64"),
    (lambda r: r["inputs"][0].update(datatype="INT32"), "input 'x': \"data\" holds floating-point numbers"),
    (lambda r: r["inputs"][0].update(shape=[3, 4]), "input 'x': \"data\" has 8 elements, but shape [3, 4]"),
    (lambda r: r.update(outputs=[{"name": "y"}]), "has no output 'y'"),
    (lambda r: r.update(parameters={"sequence_id": 1}), "no sequence batcher"),
])
def test_bad_infer_requests_name_the_input(http, model_repository, mistake, says):
    request = infer_json(model_repository.batching)
    mistake(request)
    answer = http.post("/v2/models/keras_gd/infer", json=request)
    assert answer.status_code == (501 if "sequence" in says else 400) and says in answer.json()["error"]


def test_a_wrong_byte_size_is_refused_naming_the_input(http):
    x = np.zeros((2, 4), np.float32)
    header = json.dumps({"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 24}}]}).encode()
    answer = http.post("/v2/models/keras_gd/infer", content=header + x.tobytes()[:24],
                       headers={"Inference-Header-Content-Length": str(len(header))})
    assert answer.status_code == 400
    assert answer.json()["error"] == "input 'x': binary_data_size is 24 bytes, but shape [2, 4] of 4-byte elements " \
                                     "takes 32"


def test_json_in_binary_out_with_the_length_header(http, model_repository):
    built = model_repository.batching
    request = infer_json(built, id="abc", outputs=[{"name": "Identity", "parameters": {"binary_data": True}}])
    answer = http.post("/v2/models/keras_gd/infer", json=request)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/octet-stream"
    length = int(answer.headers["inference-header-content-length"])
    header = json.loads(answer.content[:length])
    assert header["id"] == "abc" and header["outputs"][0]["parameters"] == {"binary_data_size": 2 * 3 * 4}
    got = np.frombuffer(answer.content[length:], "<f4").reshape(2, 3)
    np.testing.assert_allclose(got, built.expected(built.inputs(batch=2))[built.output], rtol=1e-5, atol=1e-5)


def test_a_raw_binary_body_is_a_batch_of_one(http, model_repository):
    built = model_repository.batching
    x = built.inputs(batch=1)
    answer = http.post("/v2/models/keras_gd/infer", content=x["x"].tobytes(),
                       headers={"Inference-Header-Content-Length": "0"})
    assert answer.status_code == 200
    length = int(answer.headers["inference-header-content-length"])
    header = json.loads(answer.content[:length])
    assert header["outputs"][0]["shape"] == [1, 3]
    np.testing.assert_allclose(np.frombuffer(answer.content[length:], "<f4").reshape(1, 3),
                               built.expected(x)[built.output], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("accept, coding", [("gzip", "gzip"), ("deflate;q=0.5, gzip;q=0", "deflate"),
                                            ("br, deflate, gzip", "deflate"), ("identity", None), ("gzip;q=x", None)])
def test_answers_are_compressed_as_the_client_accepts(http, model_repository, accept, coding):
    """Accept-Encoding (tritonclient's response_compression_algorithm) picks gzip or deflate by its weights; the
    binary data's Inference-Header-Content-Length counts the JSON before compression."""
    built = model_repository.batching
    x = built.inputs(batch=2)
    body = json.dumps({"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "data": x["x"].tolist()}],
                       "outputs": [{"name": "Identity", "parameters": {"binary_data": True}}]})
    answer = http.post("/v2/models/keras_gd/infer", content=body, headers={"Accept-Encoding": accept})
    assert answer.status_code == 200 and answer.headers.get("content-encoding") == coding
    length = int(answer.headers["inference-header-content-length"])  # httpx has decompressed answer.content
    assert json.loads(answer.content[:length])["outputs"][0]["parameters"] == {"binary_data_size": 2 * 3 * 4}
    np.testing.assert_allclose(np.frombuffer(answer.content[length:], "<f4").reshape(2, 3),
                               built.expected(x)[built.output], rtol=1e-5, atol=1e-5)


def test_bodies_over_the_limit_are_refused_naming_the_setting(http):
    limit = MAX_INPUT_BYTES + (16 << 20)  # the inputs and room for the JSON (config.py REQUEST_HEADROOM_BYTES)
    bomb = gzip.compress(b" " * (limit + 1))  # some kilobytes that decompress past the limit
    answer = http.post("/v2/models/keras_gd/infer", content=bomb, headers={"Content-Encoding": "gzip"})
    assert answer.status_code == 429
    assert "decompressed body" in answer.json()["error"] and "max_input_bytes=4096" in answer.json()["error"]
    answer = http.post("/v2/repository/index", content=b" " * (limit + 1))
    assert answer.status_code == 429 and "XLACS_MAX_INPUT_BYTES" in answer.json()["error"]
    answer = http.post("/v2/models/keras_gd/infer", content=b"\x1f\x8bnot gzip", headers={"Content-Encoding": "gzip"})
    assert answer.status_code == 400 and "not valid gzip" in answer.json()["error"]


def test_the_daemons_tokens_guard_v2_but_not_its_probes(server):
    url = f"http://{server.http_address}"
    for path in ("/v2", "/v2/models/keras_gd", "/v2/models/stats"):
        answer = httpx.get(url + path, timeout=60)
        assert answer.status_code == 401 and "Bearer" in answer.json()["error"]
    answer = httpx.post(url + "/v2/repository/models/keras_gd/unload", timeout=60)
    assert answer.status_code == 401 and server.models.model("keras_gd").state == "READY"
    assert httpx.get(url + "/v2/health/live", timeout=60).json() == {"live": True}
    assert httpx.get(url + "/v2/health/ready", timeout=60).json() == {"ready": True}


def test_errors_are_on_the_daemons_errors_page(http):
    answer = http.post("/v2/models/keras_gd/infer", json={"inputs": [{"name": "errors-page", "shape": [1],
                                                                      "datatype": "FP32", "data": [1]}]})
    assert answer.status_code == 400
    (listed,) = [e for e in http.get("/api/errors").json()["errors"] if "errors-page" in e["message"]]
    assert listed["method"] == "POST /v2/models/{name}/infer" and listed["code"] == "INVALID_ARGUMENT"


def test_not_ready_until_the_repository_has_loaded(model_repository):
    """A daemon whose repository has not loaded yet (its load not started) is live and not ready."""
    service = Daemon(Settings(cache_dir="", model_repository=str(model_repository.path)))
    http = HttpServer(create_app(service), "127.0.0.1", 0)
    http.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{http.port}", timeout=60) as client:
            assert client.get("/v2/health/live").json() == {"live": True}
            answer = client.get("/v2/health/ready")
            assert answer.status_code == 503
            assert answer.json() == {"ready": False, "reason": "the model repository is loading"}
            answer = client.get("/v2/models/keras_gd/ready")
            assert answer.status_code == 503 and "not loaded yet" in answer.json()["error"]
            assert client.post("/v2/repository/index", json={"ready": True}).json() == []
    finally:
        http.stop()
        service.close()


def test_the_timeout_parameter_is_the_requests_deadline(http, model_repository):
    """tritonclient's timeout= (microseconds): a request whose deadline has passed before it runs is 504."""
    answer = http.post("/v2/models/keras_gd/infer", json=infer_json(model_repository.batching,
                                                                    parameters={"timeout": 1}))
    assert answer.status_code == 504 and "ran past the client's deadline" in answer.json()["error"]
    answer = http.post("/v2/models/keras_gd/infer", json=infer_json(model_repository.batching,
                                                                    parameters={"timeout": 300_000_000}))
    assert answer.status_code == 200


def execute_calls_in_flight(http) -> float:
    for family in text_string_to_metric_families(http.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "xlacs_calls_in_flight" and sample.labels == {"rpc": "Execute"}:
                return sample.value
    return 0.0


def wait_for(condition, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {timeout_s} s"
        time.sleep(0.02)


def test_a_waiting_infer_blocks_no_other_request_and_leaves_when_its_client_goes(http, server, model_repository):
    """Every execute slot held: an infer waits for one in its thread while the event loop answers other requests;
    its client hanging up ends it (a failure of the model, Cancelled) without it ever running."""
    gate, stats = server.service.gates.execute, server.models.model("keras_gd").statistics
    # Held as by calls with a minute's deadline: a slot that another test still holds is waited for, up to then.
    minute = types.SimpleNamespace(time_remaining=lambda: 60.0, is_active=lambda: True)
    with contextlib.ExitStack() as held:
        for _ in range(gate.slots):
            held.enter_context(gate.hold(Call(minute, gate, None, "")))
        failures = stats.snapshot()["inference_stats"]["fail"]["count"]
        body = json.dumps(infer_json(model_repository.batching)).encode()
        host, port = server.http_address.rsplit(":", 1)
        client = socket.create_connection((host, int(port)), timeout=60)
        client.sendall(b"POST /v2/models/keras_gd/infer HTTP/1.1\r\nHost: xlacs\r\nContent-Type: application/json\r\n"
                       + f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        wait_for(lambda: execute_calls_in_flight(http) == 1, "the infer waits for an execute slot")
        assert http.get("/v2/health/live").status_code == 200
        assert http.get("/v2/models/keras_gd").json()["name"] == "keras_gd"
        assert stats.snapshot()["inference_stats"]["fail"]["count"] == failures
        client.close()
        wait_for(lambda: stats.snapshot()["inference_stats"]["fail"]["count"] == failures + 1, "a failure counted")
        assert "went away" in stats.last_error and execute_calls_in_flight(http) == 0


def test_a_timeout_takes_a_request_out_of_the_batch_queue(tmp_path):
    """A batcher that waits up to a minute for more requests: one alone with a 200 ms timeout leaves its queue then
    (504), a failure of the model."""
    built = graphdef_model(tmp_path, "gd", max_batch_size=8, extra_config="""
        dynamic_batching { max_queue_delay_microseconds: 60000000 }
        """)
    with ModelServer(tmp_path) as server, httpx.Client(base_url=f"http://{server.http_address}", timeout=120) as http:
        answer = http.post("/v2/models/gd/infer", json=infer_json(built, batch=2, parameters={"timeout": 200_000}))
        assert answer.status_code == 504 and "deadline passed while the request waited" in answer.json()["error"]
        assert server.models.model("gd").statistics.snapshot()["inference_stats"]["fail"]["count"] == 1
