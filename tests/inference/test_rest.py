"""The Open Inference Protocol over HTTP/REST driven by NVIDIA's official client (tritonclient.http, in its own venv:
tests/inference/tritonclient.py) against a real daemon serving a repository; outputs compared with TensorFlow's."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.inference import protocol_cases, tritonclient
from tests.model_repository import ModelServer, graphdef_model

HTTP_STATUS = {"UNAVAILABLE": "503", "NOT_FOUND": "404", "INVALID_ARGUMENT": "400", "UNIMPLEMENTED": "501"}
CLIENT = '''
import tritonclient.http as http
from tritonclient.utils import InferenceServerException
client = http.InferenceServerClient(args["url"], network_timeout=300, connection_timeout=300)
'''

METADATA = CLIENT + '''
reply(result={
    "live": client.is_server_live(), "ready": client.is_server_ready(), "server": client.get_server_metadata(),
    "model_ready": {m: client.is_model_ready(m) for m in args["models"]},
    "version_ready": {v: client.is_model_ready("keras_sm", v) for v in ("1", "2", "3")},
    "metadata": {m: client.get_model_metadata(m) for m in args["ready"]},
    "config": {m: client.get_model_config(m) for m in args["ready"]},
    "index": client.get_model_repository_index(),
})
'''

INFER = CLIENT + '''
outputs, answers = {}, []
for i, case in enumerate(args["cases"]):
    x = arrays[str(i)]
    given = http.InferInput(case["input"], list(x.shape), "FP32")
    given.set_data_from_numpy(x, binary_data=case["binary_in"])
    wanted = [http.InferRequestedOutput(case["output"], binary_data=case["binary_out"])] \\
        if case["request_output"] else None
    result = client.infer(case["model"], [given], model_version=case["version"], outputs=wanted,
                          request_id=f"request-{i}", request_compression_algorithm=case["compression"],
                          response_compression_algorithm=case["compression"])
    outputs[str(i)] = result.as_numpy(case["output"])
    answers.append(result.get_response())
reply(arrays=outputs, result={"answers": answers, "stats": client.get_inference_statistics("keras_gd"),
                              "all_stats": client.get_inference_statistics()})
'''

FAILURES = CLIENT + '''
failures = []
for case in args["cases"]:
    inputs = []
    for name, key, datatype in case["inputs"]:
        given = http.InferInput(name, list(arrays[key].shape), datatype)
        given.set_data_from_numpy(arrays[key], binary_data=case["binary"])
        inputs.append(given)
    wanted = [http.InferRequestedOutput(o) for o in case.get("outputs", [])] or None
    try:
        client.infer(case["model"], inputs, model_version=case.get("version", ""), outputs=wanted)
        failures.append(None)
    except InferenceServerException as e:
        failures.append([e.status(), e.message()])
reply(result=failures)
'''


def cases_of(**common):
    return {"binary_in": True, "binary_out": True, "request_output": True, "compression": None, "version": "",
            **common}


def test_health_metadata_config_and_index(model_server, model_repository, tmp_path):
    repo = model_repository
    _, got = tritonclient.run(METADATA, tmp_path, url=model_server.http_address,
                              models=[repo.saved.name, repo.batching.name, repo.static.name, repo.broken, "nope"],
                              ready=[repo.saved.name, repo.batching.name, repo.static.name])
    protocol_cases.check_health_and_metadata(got, repo)

    config = got["config"][repo.batching.name]
    assert config["name"] == "keras_gd" and config["platform"] == "tensorflow_graphdef"
    assert config["max_batch_size"] == 8 and config["input"][0]["dims"] == [4]  # int64 as JSON numbers
    assert got["config"][repo.static.name]["max_batch_size"] == 0
    assert got["config"][repo.saved.name]["output"][0]["name"] == "output_0"  # filled in from the signature


def test_version_1_metadata_is_an_error_while_unserved(model_server, tmp_path):
    script = CLIENT + '''
try:
    client.get_model_metadata("keras_sm", "1")
    reply(result=None)
except InferenceServerException as e:
    reply(result=[e.status(), e.message()])
'''
    _, got = tritonclient.run(script, tmp_path, url=model_server.http_address)
    assert got[0] == "404" and "has no version '1'" in got[1] and "['2']" in got[1]


def test_infer_json_and_binary_tensors_match_tensorflow(model_server, model_repository, tmp_path):
    repo = model_repository
    cases, arrays, expected = [], {}, []
    for built, version, batch in protocol_cases.infer_targets(repo):
        for binary_in, binary_out, request_output, compression in [
                (True, True, True, None), (False, False, True, None), (True, False, False, "gzip"),
                (False, True, True, "deflate")]:
            inputs = built.inputs(batch=batch, seed=len(cases))
            arrays[str(len(cases))] = inputs[built.input]
            expected.append(built.expected(inputs)[built.output])
            cases.append(cases_of(model=built.name, version=version, input=built.input, output=built.output,
                                  binary_in=binary_in, binary_out=binary_out, request_output=request_output,
                                  compression=compression))
    got, result = tritonclient.run(INFER, tmp_path, arrays, url=model_server.http_address, cases=cases)
    for i, (case, want) in enumerate(zip(cases, expected)):
        np.testing.assert_allclose(got[str(i)], want, rtol=1e-5, atol=1e-5, err_msg=json.dumps(case))
        answer = result["answers"][i]
        protocol_cases.check_answer(answer, case, i)
        (output,) = answer["outputs"]
        # Without a list of outputs, tritonclient asks for every output as binary data.
        binary = case["binary_out"] or not case["request_output"]
        assert ("data" not in output) == binary
        assert output["shape"] == list(want.shape) and output["datatype"] == "FP32"
    protocol_cases.check_statistics(result, cases)


def test_bad_requests_are_refused_naming_the_input(model_server, model_repository, tmp_path):
    cases = [{**case, "binary": binary} for binary in (True, False) for case, _, _ in protocol_cases.BAD_REQUESTS]
    _, got = tritonclient.run(FAILURES, tmp_path, protocol_cases.bad_arrays(model_repository),
                              url=model_server.http_address, cases=cases)
    expected = [(code, says) for _, code, says in protocol_cases.BAD_REQUESTS] * 2
    protocol_cases.check_refusals(cases, got, expected, HTTP_STATUS.get)


LOAD_UNLOAD = CLIENT + '''
seen = {"before": client.is_model_ready("gd")}
client.unload_model("gd")
seen["unloaded"] = client.is_model_ready("gd")
seen["index"] = client.get_model_repository_index()
try:
    given = http.InferInput("x", [1, 4], "FP32")
    given.set_data_from_numpy(arrays["x"])
    client.infer("gd", [given])
except InferenceServerException as e:
    seen["infer_unloaded"] = [e.status(), e.message()]
client.load_model("gd", config=args["config"])
seen["reloaded"] = client.is_model_ready("gd")
seen["config"] = client.get_model_config("gd")
given = http.InferInput("x", [1, 4], "FP32")
given.set_data_from_numpy(arrays["x"])
out = client.infer("gd", [given]).as_numpy("Identity")
for name in ("nope", "sm"):
    try:
        client.load_model(name, config=args["bad_config"] if name == "sm" else None)
    except InferenceServerException as e:
        seen["load_" + name] = [e.status(), e.message()]
try:
    client.load_model("gd", files={"file:1/model.graphdef": b"x"}, config=args["config"])
except InferenceServerException as e:
    seen["load_files"] = [e.status(), e.message()]
reply(arrays={"y": out}, result=seen)
'''


def test_unload_and_load_with_a_config_through_the_client(tmp_path):
    protocol_cases.unload_and_load(tmp_path, LOAD_UNLOAD, lambda server: server.http_address, HTTP_STATUS.get)


@pytest.mark.parametrize("binary", [True, False])
def test_concurrent_requests_to_a_batching_model_are_merged(tmp_path, binary):
    """Sixteen requests at once from tritonclient's async_infer: the event loop keeps taking them while earlier
    ones wait in the batcher, which merges them (fewer runs than requests), each answer its own rows."""
    repo = tmp_path / "models"
    built = graphdef_model(repo, "gd", max_batch_size=8, extra_config="""
        dynamic_batching { max_queue_delay_microseconds: 2000000 }
        """)
    script = CLIENT + '''
client = http.InferenceServerClient(args["url"], concurrency=16, network_timeout=300, connection_timeout=300)
pending = []
for i in range(16):
    given = http.InferInput("x", [1, 4], "FP32")
    given.set_data_from_numpy(arrays[str(i)], binary_data=args["binary"])
    pending.append(client.async_infer("gd", [given]))
outputs = {str(i): p.get_result(timeout=300).as_numpy("Identity") for i, p in enumerate(pending)}
reply(arrays=outputs, result=client.get_inference_statistics("gd"))
'''
    inputs = [built.inputs(batch=1, seed=i) for i in range(16)]
    with ModelServer(repo) as server:
        got, stats = tritonclient.run(script, tmp_path / "client", {str(i): x["x"] for i, x in enumerate(inputs)},
                                      url=server.http_address, binary=binary)
    for i, x in enumerate(inputs):
        np.testing.assert_allclose(got[str(i)], built.expected(x)["Identity"], rtol=1e-5, atol=1e-5)
    (stats,) = stats["model_stats"]
    assert stats["inference_count"] == 16 and stats["execution_count"] < 16
    assert max(b["batch_size"] for b in stats["batch_stats"]) > 1
