"""What the protocol must answer whichever transport carries it, shared by tests/inference/test_rest.py and
test_grpc.py: the health and metadata of the conftest repository, the requests it must refuse, and an unload and
load (with a config replacing config.pbtxt). A transport's tritonclient script replies with the keys checked here,
each failure as [status, message]; `status` turns a gRPC code's name into the transport's status."""
from __future__ import annotations

import json
import pathlib
from typing import Callable

import numpy as np

from tests.inference import tritonclient
from tests.model_repository import ModelServer, graphdef_model, saved_model

CONFIG = json.dumps({"platform": "tensorflow_graphdef", "max_batch_size": 2,
                     "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
                     "output": [{"name": "Identity", "data_type": "TYPE_FP32", "dims": [3]}]})
BAD_CONFIG = json.dumps({"max_batch_size": 4, "instance_group": [{"count": 2}]})
# Requests to the conftest repository's models (inputs: a name, an array's key in bad_arrays, a datatype), and the
# code and words of their refusal.
BAD_REQUESTS = [
    ({"model": "nope", "inputs": [["x", "x", "FP32"]]}, "NOT_FOUND", "no model 'nope'"),
    ({"model": "keras_gd", "version": "7", "inputs": [["x", "x", "FP32"]]}, "NOT_FOUND", "has no version '7'"),
    ({"model": "broken", "inputs": [["x", "x", "FP32"]]}, "UNAVAILABLE", "no version ready"),
    ({"model": "keras_gd", "inputs": [["z", "x", "FP32"]]}, "INVALID_ARGUMENT", "no input 'z'"),
    ({"model": "keras_gd", "inputs": [["x", "wide", "FP32"]]}, "INVALID_ARGUMENT", "input 'x' has shape [2, 5]"),
    ({"model": "keras_gd", "inputs": [["x", "ints", "INT32"]]}, "INVALID_ARGUMENT", "input 'x' has datatype INT32"),
    ({"model": "keras_gd", "inputs": [["x", "big", "FP32"]]}, "INVALID_ARGUMENT", "input 'x' has a batch of 9"),
    ({"model": "keras_gd", "inputs": [["x", "x", "FP32"]], "outputs": ["nope"]}, "INVALID_ARGUMENT",
     "no output 'nope'"),
    ({"model": "keras_static", "inputs": [["x", "x", "FP32"], ["x2", "x", "FP32"]]}, "INVALID_ARGUMENT",
     "no input 'x2'"),
]


def infer_targets(repo) -> list[tuple]:
    """(built model, version asked, batch) of the infer tests: each model of the conftest repository, with and without
    a version."""
    return [(repo.saved, "", 3), (repo.saved, "2", 1), (repo.batching, "", 8), (repo.batching, "1", 5),
            (repo.static, "", 2)]


def check_answer(answer: dict, case: dict, i: int) -> None:
    """An infer answer (as JSON) names the model, the version served (the latest READY without one) and request i."""
    assert answer["model_name"] == case["model"] and answer["id"] == f"request-{i}"
    assert answer["model_version"] == (case["version"] or {"keras_sm": "2"}.get(case["model"], "1"))


def check_statistics(result: dict, cases: list[dict]) -> None:
    """keras_gd's statistics count the cases' infers to it; every served version has statistics."""
    (stats,) = result["stats"]["model_stats"]
    infers = sum(c["model"] == "keras_gd" for c in cases)
    assert stats["name"] == "keras_gd" and int(stats["inference_stats"]["success"]["count"]) >= infers
    assert {(s["name"], s["version"]) for s in result["all_stats"]["model_stats"]} >= {
        ("keras_gd", "1"), ("keras_sm", "2"), ("keras_static", "1")}


def bad_arrays(repo) -> dict[str, np.ndarray]:
    """The arrays BAD_REQUESTS' inputs name."""
    x = repo.batching.inputs(batch=2)["x"]
    return {"x": x, "wide": np.zeros((2, 5), np.float32), "ints": x.astype(np.int32),
            "big": np.zeros((9, 4), np.float32)}


def check_refusals(cases: list[dict], failures: list, expected: list[tuple[str, str]],
                   status: Callable[[str], str]) -> None:
    """Each case failed with the expected code (a gRPC code's name) and words."""
    for case, failure, (code, says) in zip(cases, failures, expected, strict=True):
        assert failure is not None, case
        assert failure[0] == status(code) and says in failure[1], (case, failure)


def check_health_and_metadata(got: dict, repo) -> None:
    """The conftest repository's server health, model readiness, metadata (shapes as lists of ints) and index."""
    assert got["live"] and got["ready"]
    assert got["server"]["name"] == "xlacs" and "binary_tensor_data" in got["server"]["extensions"]
    assert got["model_ready"] == {repo.saved.name: True, repo.batching.name: True, repo.static.name: True,
                                  repo.broken: False, "nope": False}
    assert got["version_ready"] == {"1": False, "2": True, "3": False}  # keras_sm serves its latest version only
    assert got["metadata"][repo.saved.name] == {
        "name": "keras_sm", "platform": "tensorflow_savedmodel", "versions": ["2"],
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "output_0", "datatype": "FP32", "shape": [-1, 3]}]}
    static = got["metadata"][repo.static.name]
    assert static["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [2, 4]}]
    assert static["outputs"] == [{"name": "Identity", "datatype": "FP32", "shape": [2, 3]}]
    index = {(m["name"], m.get("version")): m for m in got["index"]}
    assert index[("keras_gd", "1")]["state"] == "READY" and index[("keras_gd", "1")].get("reason", "") == ""
    assert index[("broken", "1")]["state"] == "UNAVAILABLE"
    assert "not a serialized tensorflow.GraphDef" in index[("broken", "1")]["reason"]


def unload_and_load(tmp_path: pathlib.Path, script: str, address: Callable[[ModelServer], str],
                    status: Callable[[str], str]) -> dict:
    """Runs `script` against a daemon serving "gd" (a GraphDef, max_batch_size 8) and "sm", at `address(server)`,
    and checks its answers; `status` turns a gRPC code's name into the transport's status. Returns `seen`."""
    repo = tmp_path / "models"
    built = graphdef_model(repo, "gd", max_batch_size=8)
    saved_model(repo, "sm")
    x = built.inputs(batch=1)
    with ModelServer(repo) as server:
        got, seen = tritonclient.run(script, tmp_path / "client", {"x": x["x"]}, url=address(server),
                                     config=CONFIG, bad_config=BAD_CONFIG)
        assert server.models.model("gd").max_batch_size == 2
    assert seen["before"] and not seen["unloaded"] and seen["reloaded"]
    assert {"name": "gd", "state": "UNAVAILABLE", "reason": "unloaded"} in seen["index"]
    assert seen["infer_unloaded"][0] == status("UNAVAILABLE") and "unloaded" in seen["infer_unloaded"][1]
    assert seen["config"]["max_batch_size"] == 2
    np.testing.assert_allclose(got["y"], built.expected(x)["Identity"], rtol=1e-5, atol=1e-5)
    assert seen["load_nope"][0] == status("NOT_FOUND") and "no model 'nope'" in seen["load_nope"][1]
    assert seen["load_sm"][0] == status("INVALID_ARGUMENT") and "instance_group" in seen["load_sm"][1]
    assert seen["load_files"][0] == status("UNIMPLEMENTED") and "repository directory" in seen["load_files"][1]
    return seen
