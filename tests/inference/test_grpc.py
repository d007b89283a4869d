"""The Open Inference Protocol over gRPC driven by NVIDIA's official client (tritonclient.grpc, in its own venv:
tests/inference/tritonclient.py) against a real daemon serving a repository; outputs compared with TensorFlow's."""
from __future__ import annotations

import json

import numpy as np

from tests.inference import tritonclient
from tests.model_repository import ModelServer, graphdef_model, saved_model

CLIENT = '''
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException
client = grpcclient.InferenceServerClient(args["url"])
def failure(call, *a, **k):
    try:
        call(*a, **k)
        return None
    except InferenceServerException as e:
        return [e.status(), e.message()]
'''

METADATA = CLIENT + '''
reply(result={
    "live": client.is_server_live(), "ready": client.is_server_ready(),
    "server": client.get_server_metadata(as_json=True),
    "model_ready": {m: client.is_model_ready(m) for m in args["models"]},
    "version_ready": {v: client.is_model_ready("keras_sm", v) for v in ("1", "2", "3")},
    "metadata": {m: client.get_model_metadata(m, as_json=True) for m in args["ready"]},
    "config": {m: client.get_model_config(m, as_json=True)["config"] for m in args["ready"]},
    "index": client.get_model_repository_index(as_json=True)["models"],
    "metadata_v1": failure(client.get_model_metadata, "keras_sm", "1"),
    "metadata_broken": failure(client.get_model_metadata, "broken"),
})
'''

INFER = CLIENT + '''
outputs, answers = {}, []
for i, case in enumerate(args["cases"]):
    given = grpcclient.InferInput(case["input"], list(arrays[str(i)].shape), "FP32")
    given.set_data_from_numpy(arrays[str(i)])
    wanted = [grpcclient.InferRequestedOutput(case["output"])] if case["request_output"] else None
    result = client.infer(case["model"], [given], model_version=case["version"], outputs=wanted,
                          request_id=f"request-{i}", timeout=case["timeout_us"])
    outputs[str(i)] = result.as_numpy(case["output"])
    answers.append(result.get_response(as_json=True))
reply(arrays=outputs, result={"answers": answers,
                              "stats": client.get_inference_statistics("keras_gd", as_json=True),
                              "all_stats": client.get_inference_statistics(as_json=True)})
'''

FAILURES = CLIENT + '''
failures = []
for case in args["cases"]:
    inputs = []
    for name, key, datatype in case["inputs"]:
        given = grpcclient.InferInput(name, list(arrays[key].shape), datatype)
        given.set_data_from_numpy(arrays[key])
        inputs.append(given)
    wanted = [grpcclient.InferRequestedOutput(o) for o in case.get("outputs", [])] or None
    failures.append(failure(client.infer, case["model"], inputs, model_version=case.get("version", ""),
                            outputs=wanted, priority=case.get("priority", 0)))
reply(result=failures)
'''


def test_health_metadata_config_and_index(model_server, model_repository, tmp_path):
    repo = model_repository
    _, got = tritonclient.run(METADATA, tmp_path, url=model_server.grpc_address,
                              models=[repo.saved.name, repo.batching.name, repo.static.name, repo.broken, "nope"],
                              ready=[repo.saved.name, repo.batching.name, repo.static.name])
    assert got["live"] and got["ready"]
    assert got["server"]["name"] == "xlacs" and "model_repository" in got["server"]["extensions"]
    assert got["model_ready"] == {repo.saved.name: True, repo.batching.name: True, repo.static.name: True,
                                  repo.broken: False, "nope": False}
    assert got["version_ready"] == {"1": False, "2": True, "3": False}  # keras_sm serves its latest version only

    # tritonclient's as_json is MessageToJson: int64 shapes are strings.
    assert got["metadata"][repo.saved.name] == {
        "name": "keras_sm", "platform": "tensorflow_savedmodel", "versions": ["2"],
        "inputs": [{"name": "x", "datatype": "FP32", "shape": ["-1", "4"]}],
        "outputs": [{"name": "output_0", "datatype": "FP32", "shape": ["-1", "3"]}]}
    static = got["metadata"][repo.static.name]
    assert static["inputs"] == [{"name": "x", "datatype": "FP32", "shape": ["2", "4"]}]
    assert static["outputs"] == [{"name": "Identity", "datatype": "FP32", "shape": ["2", "3"]}]

    config = got["config"][repo.batching.name]
    assert (config["name"], config["platform"], config["max_batch_size"]) == ("keras_gd", "tensorflow_graphdef", 8)
    assert config["input"][0]["dims"] == ["4"] and "max_batch_size" not in got["config"][repo.static.name]
    assert got["config"][repo.saved.name]["output"][0]["name"] == "output_0"  # filled in from the signature

    index = {(m["name"], m.get("version")): m for m in got["index"]}
    assert index[("keras_gd", "1")]["state"] == "READY" and "reason" not in index[("keras_gd", "1")]
    assert index[("broken", "1")]["state"] == "UNAVAILABLE"
    assert "not a serialized tensorflow.GraphDef" in index[("broken", "1")]["reason"]

    assert got["metadata_v1"][0] == "StatusCode.NOT_FOUND" and "['2']" in got["metadata_v1"][1]
    assert got["metadata_broken"][0] == "StatusCode.UNAVAILABLE" and "no version ready" in got["metadata_broken"][1]


def test_infer_matches_tensorflow(model_server, model_repository, tmp_path):
    repo = model_repository
    cases, arrays, expected = [], {}, []
    for built, version, batch in [(repo.saved, "", 3), (repo.saved, "2", 1), (repo.batching, "", 8),
                                  (repo.batching, "1", 5), (repo.static, "", 2)]:
        for request_output, timeout_us in [(True, None), (False, 300_000_000)]:
            inputs = built.inputs(batch=batch, seed=len(cases))
            arrays[str(len(cases))] = inputs[built.input]
            expected.append(built.expected(inputs)[built.output])
            cases.append({"model": built.name, "version": version, "input": built.input, "output": built.output,
                          "request_output": request_output, "timeout_us": timeout_us})
    got, result = tritonclient.run(INFER, tmp_path, arrays, url=model_server.grpc_address, cases=cases)
    for i, (case, want) in enumerate(zip(cases, expected)):
        np.testing.assert_allclose(got[str(i)], want, rtol=1e-5, atol=1e-5, err_msg=json.dumps(case))
        answer = result["answers"][i]
        assert answer["model_name"] == case["model"] and answer["id"] == f"request-{i}"
        assert answer["model_version"] == (case["version"] or {"keras_sm": "2"}.get(case["model"], "1"))
        (output,) = answer["outputs"]
        assert output == {"name": case["output"], "datatype": "FP32", "shape": [str(d) for d in want.shape]}
        assert len(answer["raw_output_contents"]) == 1  # the bytes, not typed contents
    infers = sum(c["model"] == "keras_gd" for c in cases)
    (stats,) = result["stats"]["model_stats"]
    assert stats["name"] == "keras_gd" and int(stats["inference_stats"]["success"]["count"]) >= infers
    assert {(s["name"], s["version"]) for s in result["all_stats"]["model_stats"]} >= {
        ("keras_gd", "1"), ("keras_sm", "2"), ("keras_static", "1")}


def test_bad_requests_are_refused_naming_the_input(model_server, model_repository, tmp_path):
    repo = model_repository
    x = repo.batching.inputs(batch=2)["x"]
    arrays = {"x": x, "wide": np.zeros((2, 5), np.float32), "ints": x.astype(np.int32),
              "big": np.zeros((9, 4), np.float32)}
    cases = [
        {"model": "nope", "inputs": [["x", "x", "FP32"]]},
        {"model": "keras_gd", "version": "7", "inputs": [["x", "x", "FP32"]]},
        {"model": "broken", "inputs": [["x", "x", "FP32"]]},
        {"model": "keras_gd", "inputs": [["z", "x", "FP32"]]},
        {"model": "keras_gd", "inputs": [["x", "wide", "FP32"]]},
        {"model": "keras_gd", "inputs": [["x", "ints", "INT32"]]},
        {"model": "keras_gd", "inputs": [["x", "big", "FP32"]]},
        {"model": "keras_gd", "inputs": [["x", "x", "FP32"]], "outputs": ["nope"]},
        {"model": "keras_static", "inputs": [["x", "x", "FP32"], ["x2", "x", "FP32"]]},
        {"model": "keras_gd", "inputs": [["x", "x", "FP32"], ["x", "x", "FP32"]]},
        {"model": "keras_gd", "inputs": [["x", "x", "FP32"]], "priority": 1},
    ]
    _, got = tritonclient.run(FAILURES, tmp_path, arrays, url=model_server.grpc_address, cases=cases)
    expected = [("NOT_FOUND", "no model 'nope'"), ("NOT_FOUND", "has no version '7'"),
                ("UNAVAILABLE", "no version ready"), ("INVALID_ARGUMENT", "no input 'z'"),
                ("INVALID_ARGUMENT", "input 'x' has shape [2, 5]"), ("INVALID_ARGUMENT", "input 'x' has datatype INT32"),
                ("INVALID_ARGUMENT", "input 'x' has a batch of 9"), ("INVALID_ARGUMENT", "no output 'nope'"),
                ("INVALID_ARGUMENT", "no input 'x2'"), ("INVALID_ARGUMENT", "input 'x' is given twice"),
                ("UNIMPLEMENTED", "parameter 'priority' is not offered")]
    for case, failure, (code, says) in zip(cases, got, expected, strict=True):
        assert failure is not None, case
        assert failure[0] == f"StatusCode.{code}" and says in failure[1], (case, failure)


STREAM = CLIENT + '''
import queue
answers = queue.Queue()
client.start_stream(callback=lambda result, error: answers.put((result, error)))
for i, case in enumerate(args["cases"]):
    given = grpcclient.InferInput(case["input"], list(arrays[str(i)].shape), "FP32")
    given.set_data_from_numpy(arrays[str(i)])
    client.async_stream_infer(case["model"], [given], request_id=f"stream-{i}")
outputs, seen = {}, []
for i in range(len(args["cases"])):
    result, error = answers.get(timeout=300)
    if error is not None:
        seen.append({"error": [error.status(), error.message()]})
        continue
    response = result.get_response()
    outputs[response.id] = result.as_numpy(response.outputs[0].name)
    seen.append({"id": response.id, "version": response.model_version})
client.stop_stream()
reply(arrays=outputs, result=seen)
'''


def test_stream_infer_answers_each_request_and_goes_on_after_an_error(model_server, model_repository, tmp_path):
    repo = model_repository
    cases, arrays, expected = [], {}, {}
    for i, (built, input_name) in enumerate([(repo.batching, "x"), (repo.saved, "x"), (repo.batching, "z"),
                                             (repo.static, "x"), (repo.batching, "x")]):
        inputs = built.inputs(batch=2, seed=i)
        arrays[str(i)] = inputs[built.input]
        expected[f"stream-{i}"] = built.expected(inputs)[built.output]
        cases.append({"model": built.name, "input": input_name})
    got, seen = tritonclient.run(STREAM, tmp_path, arrays, url=model_server.grpc_address, cases=cases)
    # One answer per request, in the order sent: the bad one's is an error, and the stream goes on.
    assert [s.get("id") for s in seen] == ["stream-0", "stream-1", None, "stream-3", "stream-4"]
    assert "no input 'z'" in seen[2]["error"][1]
    assert seen[1]["version"] == "2"
    for request_id in ("stream-0", "stream-1", "stream-3", "stream-4"):
        np.testing.assert_allclose(got[request_id], expected[request_id], rtol=1e-5, atol=1e-5)


UNOFFERED = CLIENT + '''
reply(result={
    "system_shm": failure(client.get_system_shared_memory_status),
    "register_system_shm": failure(client.register_system_shared_memory, "r", "/r", 64),
    "cuda_shm": failure(client.get_cuda_shared_memory_status),
    "unregister_cuda_shm": failure(client.unregister_cuda_shared_memory),
    "trace": failure(client.update_trace_settings, settings={"trace_level": ["TIMESTAMPS"]}),
    "log": failure(client.update_log_settings, settings={"log_verbose_level": 1}),
})
'''


def test_unoffered_rpcs_say_what_xlacs_offers_instead(model_server, tmp_path):
    _, got = tritonclient.run(UNOFFERED, tmp_path, url=model_server.grpc_address)
    for rpc, says in [("system_shm", "send the tensor in the request"), ("register_system_shm", "xlacs.Client"),
                      ("cuda_shm", "send the tensor in the request"), ("unregister_cuda_shm", "shared memory"),
                      ("trace", "ModelStatistics"), ("log", "standard error")]:
        assert got[rpc][0] == "StatusCode.UNIMPLEMENTED" and says in got[rpc][1], (rpc, got[rpc])


LOAD_UNLOAD = CLIENT + '''
given = grpcclient.InferInput("x", [1, 4], "FP32")
given.set_data_from_numpy(arrays["x"])
seen = {"before": client.is_model_ready("gd")}
client.unload_model("gd", unload_dependents=True)
seen["unloaded"] = client.is_model_ready("gd")
seen["index"] = client.get_model_repository_index(as_json=True)["models"]
seen["infer_unloaded"] = failure(client.infer, "gd", [given])
client.load_model("gd", config=args["config"])
seen["reloaded"] = client.is_model_ready("gd")
seen["config"] = client.get_model_config("gd", as_json=True)["config"]
out = client.infer("gd", [given]).as_numpy("Identity")
seen["load_nope"] = failure(client.load_model, "nope")
seen["load_bad"] = failure(client.load_model, "sm", config=args["bad_config"])
seen["load_files"] = failure(client.load_model, "gd", config=args["config"], files={"file:1/model.graphdef": b"x"})
seen["unload_nope"] = failure(client.unload_model, "nope")
reply(arrays={"y": out}, result=seen)
'''


def test_unload_and_load_with_a_config(tmp_path):
    repo = tmp_path / "models"
    built = graphdef_model(repo, "gd", max_batch_size=8)
    saved_model(repo, "sm")
    config = json.dumps({"platform": "tensorflow_graphdef", "max_batch_size": 2,
                         "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
                         "output": [{"name": "Identity", "data_type": "TYPE_FP32", "dims": [3]}]})
    bad_config = json.dumps({"max_batch_size": 4, "instance_group": [{"count": 2}]})
    x = built.inputs(batch=1)
    with ModelServer(repo) as server:
        got, seen = tritonclient.run(LOAD_UNLOAD, tmp_path / "client", {"x": x["x"]}, url=server.grpc_address,
                                     config=config, bad_config=bad_config)
        assert server.models.model("gd").max_batch_size == 2
    assert seen["before"] and not seen["unloaded"] and seen["reloaded"]
    assert {"name": "gd", "state": "UNAVAILABLE", "reason": "unloaded"} in seen["index"]
    assert seen["infer_unloaded"][0] == "StatusCode.UNAVAILABLE" and "unloaded" in seen["infer_unloaded"][1]
    assert seen["config"]["max_batch_size"] == 2
    np.testing.assert_allclose(got["y"], built.expected(x)["Identity"], rtol=1e-5, atol=1e-5)
    assert seen["load_nope"][0] == "StatusCode.NOT_FOUND" and "no model 'nope'" in seen["load_nope"][1]
    assert seen["load_bad"][0] == "StatusCode.INVALID_ARGUMENT" and "instance_group" in seen["load_bad"][1]
    assert seen["load_files"][0] == "StatusCode.UNIMPLEMENTED" and "repository directory" in seen["load_files"][1]
    assert seen["unload_nope"][0] == "StatusCode.NOT_FOUND"
