"""Loading and unloading models without a restart (the protocol's repository load and unload calls): an unloaded
model is gone and loads again; a load's config replaces config.pbtxt; a reload whose new version fails leaves the
versions that served serving; an unload waits for the requests in flight and refuses new ones meanwhile."""
from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from tests.model_repository import Context, ModelServer, graphdef_model, saved_model
from xlacs_server.errors import InvalidRequest, NotFound, Unavailable

WAIT_S = 60


@pytest.fixture
def served(tmp_path):
    saved = saved_model(tmp_path, "keras_sm", versions=(1, 2))
    graphdef = graphdef_model(tmp_path, "keras_gd", max_batch_size=4)
    with ModelServer(tmp_path) as server:
        yield server, saved, graphdef


def status(server, name):
    return [(s.version, s.state, s.reason) for s in server.models.index() if s.name == name]


def test_an_unloaded_model_is_gone_until_loaded_again(served):
    server, saved, _ = served
    model = server.models.model("keras_sm")
    server.models.unload("keras_sm")
    assert status(server, "keras_sm") == [("", "UNAVAILABLE", "unloaded")]
    with pytest.raises(Unavailable, match="model 'keras_sm' is not served: unloaded"):
        server.models.model("keras_sm")
    with pytest.raises(Unavailable, match="is UNLOADING"):
        model.infer(saved.inputs(1), None, Context())
    assert status(server, "keras_gd") == [("1", "READY", "")]  # the others serve on
    server.models.load("keras_sm")
    inputs = saved.inputs(3)
    got = server.models.model("keras_sm").infer(inputs, None, Context())
    np.testing.assert_allclose(got["output_0"], saved.expected(inputs, 2)["output_0"], rtol=1e-5, atol=1e-5)


def test_a_loads_config_replaces_config_pbtxt(served):
    server, saved, _ = served
    server.models.load("keras_sm", json.dumps({"max_batch_size": 2, "version_policy": {"specific": {"versions": [1]}}}))
    assert status(server, "keras_sm") == [("1", "READY", "")]
    model = server.models.model("keras_sm")
    assert model.max_batch_size == 2 and model.config.max_batch_size == 2
    inputs = saved.inputs(2)
    np.testing.assert_allclose(model.infer(inputs, None, Context())["output_0"],
                               saved.expected(inputs, 1)["output_0"], rtol=1e-5, atol=1e-5)
    with pytest.raises(InvalidRequest, match="has a batch of 3; model 'keras_sm' version 1 takes 1 to "
                                             "max_batch_size 2"):
        model.infer(saved.inputs(3), None, Context())


def test_a_loads_config_that_is_no_model_config_is_refused(served):
    server, _, _ = served
    with pytest.raises(InvalidRequest, match="the load call's config is not a ModelConfig"):
        server.models.load("keras_sm", '{"max_batch_size": "many"}')
    with pytest.raises(InvalidRequest, match="config field model_warmup is not honoured"):
        server.models.load("keras_sm", '{"model_warmup": [{"name": "w", "batch_size": 1}]}')


def test_a_reload_whose_new_version_fails_keeps_the_versions_that_served(served):
    server, saved, _ = served
    broken = server.models.directory / "keras_sm" / "3" / "model.savedmodel"
    broken.mkdir(parents=True)
    (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
    with pytest.raises(InvalidRequest, match="saved_model.pb is not a SavedModel protobuf"):
        server.models.load("keras_sm")
    assert status(server, "keras_sm") == [("2", "READY", "")]
    inputs = saved.inputs(1)
    np.testing.assert_allclose(server.models.model("keras_sm").infer(inputs, None, Context())["output_0"],
                               saved.expected(inputs, 2)["output_0"], rtol=1e-5, atol=1e-5)


def test_a_reload_serves_the_new_versions_and_drops_the_old(served):
    server, _, _ = served
    saved = saved_model(server.models.directory, "keras_sm", versions=(3,))
    old = server.models.model("keras_sm")
    server.models.load("keras_sm")
    assert status(server, "keras_sm") == [("3", "READY", "")]
    assert old.state == "UNLOADING"
    inputs = saved.inputs(2)
    np.testing.assert_allclose(server.models.model("keras_sm").infer(inputs, None, Context())["output_0"],
                               saved.expected(inputs, 3)["output_0"], rtol=1e-5, atol=1e-5)


def test_an_unload_waits_for_the_requests_in_flight_and_refuses_new_ones(served):
    server, _, graphdef = served
    model = server.models.model("keras_gd")
    with model._request():  # a request in flight
        unloading = threading.Thread(target=server.models.unload, args=("keras_gd",))
        unloading.start()
        deadline = time.monotonic() + WAIT_S
        while model.state != "UNLOADING":
            assert time.monotonic() < deadline, "the unload did not start"
            time.sleep(0.01)
        with pytest.raises(Unavailable, match="model 'keras_gd' version 1 is UNLOADING"):
            model.infer(graphdef.inputs(1), None, Context())
        assert unloading.is_alive()  # it waits for the request in flight (up to shutdown_grace_s, 30 s)
    unloading.join(WAIT_S)
    assert not unloading.is_alive()
    assert status(server, "keras_gd") == [("", "UNAVAILABLE", "unloaded")]


def test_a_model_whose_executable_the_daemon_dropped_is_bound_again_from_the_cache(tmp_path):
    """max_loaded 1: loading the second static model drops the first's executable; an infer of the first binds it
    again (from the in-process cache, compiling nothing) and answers as TF does."""
    first = graphdef_model(tmp_path, "first", max_batch_size=0)
    graphdef_model(tmp_path, "second", versions=(2,), max_batch_size=0)  # other weights: another executable id
    with ModelServer(tmp_path, max_loaded=1) as server:
        compiles = server.service.counters.compiles
        with pytest.raises(NotFound):  # dropped when the second model loaded
            server.service.loaded(server.models.model("first").signatures["serving_default"].executable_id)
        inputs = first.inputs(2)
        got = server.models.model("first").infer(inputs, None, Context())
        np.testing.assert_allclose(got["Identity"], first.expected(inputs)["Identity"], rtol=1e-5, atol=1e-5)
        assert server.service.counters.compiles == compiles
