"""The Open Inference Protocol over gRPC driven by NVIDIA's official client (tritonclient.grpc, in its own venv:
tests/inference/tritonclient.py) against a real daemon serving a repository; outputs compared with TensorFlow's."""
from __future__ import annotations

import json

import numpy as np

from tests.inference import protocol_cases, tritonclient

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
def metadata(name):  # as_json is MessageToJson's: int64 shapes as strings
    found = client.get_model_metadata(name, as_json=True)
    for tensor in found["inputs"] + found["outputs"]:
        tensor["shape"] = [int(d) for d in tensor["shape"]]
    return found
reply(result={
    "live": client.is_server_live(), "ready": client.is_server_ready(),
    "server": client.get_server_metadata(as_json=True),
    "model_ready": {m: client.is_model_ready(m) for m in args["models"]},
    "version_ready": {v: client.is_model_ready("keras_sm", v) for v in ("1", "2", "3")},
    "metadata": {m: metadata(m) for m in args["ready"]},
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
    protocol_cases.check_health_and_metadata(got, repo)
    assert "model_repository" in got["server"]["extensions"]

    config = got["config"][repo.batching.name]
    assert (config["name"], config["platform"], config["max_batch_size"]) == ("keras_gd", "tensorflow_graphdef", 8)
    assert config["input"][0]["dims"] == ["4"] and "max_batch_size" not in got["config"][repo.static.name]
    assert got["config"][repo.saved.name]["output"][0]["name"] == "output_0"  # filled in from the signature
    assert got["metadata_v1"][0] == "StatusCode.NOT_FOUND" and "['2']" in got["metadata_v1"][1]
    assert got["metadata_broken"][0] == "StatusCode.UNAVAILABLE" and "no version ready" in got["metadata_broken"][1]


def test_infer_matches_tensorflow(model_server, model_repository, tmp_path):
    repo = model_repository
    cases, arrays, expected = [], {}, []
    for built, version, batch in protocol_cases.infer_targets(repo):
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
        protocol_cases.check_answer(answer, case, i)
        (output,) = answer["outputs"]
        assert output == {"name": case["output"], "datatype": "FP32", "shape": [str(d) for d in want.shape]}
        assert len(answer["raw_output_contents"]) == 1  # the bytes, not typed contents
    protocol_cases.check_statistics(result, cases)


def test_bad_requests_are_refused_naming_the_input(model_server, model_repository, tmp_path):
    extra = [({"model": "keras_gd", "inputs": [["x", "x", "FP32"], ["x", "x", "FP32"]]}, "INVALID_ARGUMENT",
              "input 'x' is given twice"),
             ({"model": "keras_gd", "inputs": [["x", "x", "FP32"]], "priority": 1}, "UNIMPLEMENTED",
              "parameter 'priority' is not offered")]
    cases = protocol_cases.BAD_REQUESTS + extra
    _, got = tritonclient.run(FAILURES, tmp_path, protocol_cases.bad_arrays(model_repository),
                              url=model_server.grpc_address, cases=[case for case, _, _ in cases])
    protocol_cases.check_refusals([case for case, _, _ in cases], got, [(code, says) for _, code, says in cases],
                                  lambda code: f"StatusCode.{code}")


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
    try:
        result, error = answers.get(timeout=ANSWER_S)
    except queue.Empty:
        sys.exit(f"answer {i + 1} of {len(args['cases'])} did not come within {ANSWER_S} s; those that came: {seen}")
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
seen["load_sm"] = failure(client.load_model, "sm", config=args["bad_config"])
seen["load_files"] = failure(client.load_model, "gd", config=args["config"], files={"file:1/model.graphdef": b"x"})
seen["unload_nope"] = failure(client.unload_model, "nope")
reply(arrays={"y": out}, result=seen)
'''


def test_unload_and_load_with_a_config(tmp_path):
    seen = protocol_cases.unload_and_load(tmp_path, LOAD_UNLOAD, lambda server: server.grpc_address,
                                          lambda code: f"StatusCode.{code}")
    assert seen["unload_nope"][0] == "StatusCode.NOT_FOUND" and "no model 'nope'" in seen["unload_nope"][1]
