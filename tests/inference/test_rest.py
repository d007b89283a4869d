"""The Open Inference Protocol over HTTP/REST driven by NVIDIA's official client (tritonclient.http, in its own venv:
tests/inference/tritonclient.py) against a real daemon serving a repository; outputs compared with TensorFlow's."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.inference import tritonclient
from tests.model_repository import ModelServer, graphdef_model, saved_model

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
    assert got["live"] and got["ready"]
    assert got["server"]["name"] == "xlacs" and "binary_tensor_data" in got["server"]["extensions"]
    assert got["model_ready"] == {repo.saved.name: True, repo.batching.name: True, repo.static.name: True,
                                  repo.broken: False, "nope": False}
    assert got["version_ready"] == {"1": False, "2": True, "3": False}  # keras_sm serves its latest version only

    saved = got["metadata"][repo.saved.name]
    assert saved == {"name": "keras_sm", "platform": "tensorflow_savedmodel", "versions": ["2"],
                     "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
                     "outputs": [{"name": "output_0", "datatype": "FP32", "shape": [-1, 3]}]}
    static = got["metadata"][repo.static.name]
    assert static["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [2, 4]}]
    assert static["outputs"] == [{"name": "Identity", "datatype": "FP32", "shape": [2, 3]}]

    config = got["config"][repo.batching.name]
    assert config["name"] == "keras_gd" and config["platform"] == "tensorflow_graphdef"
    assert config["max_batch_size"] == 8 and config["input"][0]["dims"] == [4]  # int64 as JSON numbers
    assert got["config"][repo.static.name]["max_batch_size"] == 0
    assert got["config"][repo.saved.name]["output"][0]["name"] == "output_0"  # filled in from the signature

    index = {(m["name"], m.get("version")): m for m in got["index"]}
    assert index[("keras_gd", "1")]["state"] == "READY" and index[("keras_gd", "1")]["reason"] == ""
    assert index[("broken", "1")]["state"] == "UNAVAILABLE"
    assert "not a serialized tensorflow.GraphDef" in index[("broken", "1")]["reason"]


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
    for built, version, batch in [(repo.saved, "", 3), (repo.saved, "2", 1), (repo.batching, "", 8),
                                  (repo.batching, "1", 5), (repo.static, "", 2)]:
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
        assert answer["model_name"] == case["model"] and answer["id"] == f"request-{i}"
        assert answer["model_version"] == (case["version"] or {"keras_sm": "2"}.get(case["model"], "1"))
        (output,) = answer["outputs"]
        # Without a list of outputs, tritonclient asks for every output as binary data.
        binary = case["binary_out"] or not case["request_output"]
        assert ("data" not in output) == binary
        assert output["shape"] == list(want.shape) and output["datatype"] == "FP32"
    infers = sum(c["model"] == "keras_gd" for c in cases)
    (stats,) = result["stats"]["model_stats"]
    assert stats["name"] == "keras_gd" and stats["inference_stats"]["success"]["count"] >= infers
    assert {(s["name"], s["version"]) for s in result["all_stats"]["model_stats"]} >= {
        ("keras_gd", "1"), ("keras_sm", "2"), ("keras_static", "1")}


def test_bad_requests_are_refused_naming_the_input(model_server, model_repository, tmp_path):
    repo = model_repository
    x = repo.batching.inputs(batch=2)["x"]
    arrays = {"x": x, "wide": np.zeros((2, 5), np.float32), "ints": x.astype(np.int32),
              "big": np.zeros((9, 4), np.float32), "static": repo.static.inputs()["x"]}
    base = [
        {"model": "nope", "inputs": [["x", "x", "FP32"]]},
        {"model": "keras_gd", "version": "7", "inputs": [["x", "x", "FP32"]]},
        {"model": "broken", "inputs": [["x", "x", "FP32"]]},
        {"model": "keras_gd", "inputs": [["z", "x", "FP32"]]},
        {"model": "keras_gd", "inputs": [["x", "wide", "FP32"]]},
        {"model": "keras_gd", "inputs": [["x", "ints", "INT32"]]},
        {"model": "keras_gd", "inputs": [["x", "big", "FP32"]]},
        {"model": "keras_gd", "inputs": [["x", "x", "FP32"]], "outputs": ["nope"]},
        {"model": "keras_static", "inputs": [["x", "x", "FP32"], ["x2", "x", "FP32"]]},
    ]
    cases = [{**case, "binary": binary} for binary in (True, False) for case in base]
    _, got = tritonclient.run(FAILURES, tmp_path, arrays, url=model_server.http_address, cases=cases)
    expected = [("404", "no model 'nope'"), ("404", "has no version '7'"), ("503", "no version ready"),
                ("400", "no input 'z'"), ("400", "input 'x' has shape [2, 5]"),
                ("400", "input 'x' has datatype INT32"), ("400", "input 'x' has a batch of 9"),
                ("400", "no output 'nope'"), ("400", "no input 'x2'")]
    for case, failure, (code, says) in zip(cases, got, expected * 2):
        assert failure is not None, case
        assert failure[0] == code and says in failure[1], (case, failure)


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
    repo = tmp_path / "models"
    built = graphdef_model(repo, "gd", max_batch_size=8)
    saved_model(repo, "sm")
    config = json.dumps({"platform": "tensorflow_graphdef", "max_batch_size": 2,
                         "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
                         "output": [{"name": "Identity", "data_type": "TYPE_FP32", "dims": [3]}]})
    bad_config = json.dumps({"max_batch_size": 4, "instance_group": [{"count": 2}]})
    x = built.inputs(batch=1)
    with ModelServer(repo) as server:
        got, seen = tritonclient.run(LOAD_UNLOAD, tmp_path / "client", {"x": x["x"]}, url=server.http_address,
                                     config=config, bad_config=bad_config)
        assert server.models.model("gd").max_batch_size == 2
    assert seen["before"] and not seen["unloaded"] and seen["reloaded"]
    assert {"name": "gd", "state": "UNAVAILABLE", "reason": "unloaded"} in seen["index"]
    assert seen["infer_unloaded"][0] == "503" and "unloaded" in seen["infer_unloaded"][1]
    assert seen["config"]["max_batch_size"] == 2
    np.testing.assert_allclose(got["y"], built.expected(x)["Identity"], rtol=1e-5, atol=1e-5)
    assert seen["load_nope"][0] == "404" and "no model 'nope'" in seen["load_nope"][1]
    assert seen["load_sm"][0] == "400" and "instance_group" in seen["load_sm"][1]
    assert seen["load_files"][0] == "501" and "repository directory" in seen["load_files"][1]


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
