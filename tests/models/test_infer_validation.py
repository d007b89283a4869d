"""Bad inference requests are refused before any run, naming the input or output and what the model takes; each
counts as a failure in the model's statistics, and an answered request as a success with its run."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tests.model_repository import Context, ModelServer, graphdef_model
from xlacs_server.errors import DeadlineExceeded, InvalidRequest


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = tmp_path_factory.mktemp("models")
    batching = graphdef_model(path, "keras_gd", max_batch_size=8)
    static = graphdef_model(path, "keras_static", max_batch_size=0)
    with ModelServer(path) as server:
        yield server, batching, static


def x(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


REFUSED = [
    ("keras_gd", {"x": x(1, 4), "z": x(1, 4)}, None,
     r"model 'keras_gd' version 1 has no input 'z'; its inputs are \['x'\]"),
    ("keras_gd", {}, None, r"input 'x' is missing: model 'keras_gd' version 1 takes \['x'\]"),
    ("keras_gd", {"x": x(2, 4, dtype=np.float64)}, None,
     "input 'x' has datatype FP64; model 'keras_gd' version 1 takes FP32"),
    ("keras_gd", {"x": x(2, 4, dtype=np.complex64)}, None,
     "input 'x' has datatype complex64; model 'keras_gd' version 1 takes FP32"),
    ("keras_gd", {"x": x(2, 5)}, None, r"input 'x' has shape \[2, 5\]; model 'keras_gd' version 1 takes \[-1, 4\]"),
    ("keras_gd", {"x": x(4)}, None, r"input 'x' has shape \[4\]; model 'keras_gd' version 1 takes \[-1, 4\]"),
    ("keras_gd", {"x": x(9, 4)}, None, "input 'x' has a batch of 9; model 'keras_gd' version 1 takes 1 to "
                                       "max_batch_size 8"),
    ("keras_gd", {"x": x(0, 4)}, None, "input 'x' has a batch of 0"),
    ("keras_static", {"x": x(3, 4)}, None, r"input 'x' has shape \[3, 4\]; model 'keras_static' version 1 takes "
                                           r"\[2, 4\]"),
    ("keras_gd", {"x": x(1, 4)}, ["Identity", "nope"],
     r"model 'keras_gd' version 1 has no output 'nope'; its outputs are \['Identity'\]"),
]


@pytest.mark.parametrize("name, inputs, outputs, message", REFUSED)
def test_a_bad_request_is_refused_naming_what_is_wrong_and_counted_as_a_failure(served, name, inputs, outputs,
                                                                                 message):
    model = served[0].models.model(name)
    before = model.statistics.snapshot()
    with pytest.raises(InvalidRequest, match=message):
        model.infer(inputs, outputs, Context())
    after = model.statistics.snapshot()
    assert after["inference_stats"]["fail"]["count"] == before["inference_stats"]["fail"]["count"] + 1
    assert after["execution_count"] == before["execution_count"]
    assert re.search(message, model.statistics.last_error)


def test_an_answered_request_counts_a_success_and_a_run_of_its_batch(served):
    server, batching, _ = served
    model = server.models.model("keras_gd")
    before = model.statistics.snapshot()
    inputs = batching.inputs(3)
    got = model.infer(inputs, None, Context(deadline_s=600))
    np.testing.assert_allclose(got["Identity"], batching.expected(inputs)["Identity"], rtol=1e-5, atol=1e-5)
    after = model.statistics.snapshot()
    assert after["inference_stats"]["success"]["count"] == before["inference_stats"]["success"]["count"] + 1
    assert after["execution_count"] == before["execution_count"] + 1
    assert {b["batch_size"] for b in after["batch_stats"]} >= {3}


def test_a_request_past_its_deadline_stops_before_it_runs(served):
    server, batching, _ = served
    model = server.models.model("keras_gd")
    before = model.statistics.snapshot()["execution_count"]
    with pytest.raises(DeadlineExceeded, match="the client's deadline"):
        model.infer(batching.inputs(1), None, Context(deadline_s=0))
    assert model.statistics.snapshot()["execution_count"] == before
