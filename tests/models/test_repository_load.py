"""A model repository's models load, each kind by its own path, and answer as TensorFlow does: a Keras SavedModel
without a config (batching from its signature), one with a config and a signature picked by parameter, frozen
GraphDefs batching and static. Version policies pick the versions served; a model that fails to load is
UNAVAILABLE with its error and stops no other."""
from __future__ import annotations

import concurrent.futures
import shutil

import numpy as np
import pytest

from tests.model_repository import (Context, ModelServer, failing_model, graphdef_model, saved_model,
                                    write_config)
from tests.saved_model.models import saved, tf_outputs
from xlacs_server.errors import NotFound, Unavailable


def assert_close(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape, name
        assert np.std(value) > 1e-2, "the oracle's output is too flat to tell anything"
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(value).max()))


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    path = tmp_path_factory.mktemp("models")
    built = {
        "saved": saved_model(path, "keras_sm", versions=(1, 2, 3)),
        "batching": graphdef_model(path, "keras_gd", versions=(1, 2), max_batch_size=8,
                                   extra_config="version_policy: { all: {} }"),
        "static": graphdef_model(path, "keras_static", versions=(1, 2, 3), max_batch_size=0,
                                 extra_config="version_policy: { specific: { versions: [1, 3] } }"),
        "latest2": saved_model(path, "keras_latest2", versions=(1, 2, 3), config="""
            max_batch_size: 2
            version_policy: { latest: { num_versions: 2 } }
            """),
        "broken": failing_model(path, "broken"),
    }
    affine = path / "affine" / "1" / "model.savedmodel"
    shutil.copytree(saved("affine"), affine)
    write_config(path / "affine", """
        platform: "tensorflow_savedmodel"
        max_batch_size: 0
        input [{ name: "v" data_type: TYPE_FP32 dims: [2, 3] }]
        parameters: { key: "TF_SIGNATURE_DEF" value: { string_value: "shift" } }
        """)
    built["affine"] = affine
    return path, built


@pytest.fixture(scope="module")
def served(repository):
    with ModelServer(repository[0]) as server:
        yield server, repository[1]


def test_the_index_lists_every_version_the_policies_serve_with_its_state(served):
    server, _ = served
    index = [(s.name, s.version, s.state) for s in server.models.index()]
    assert index == [("affine", "1", "READY"), ("broken", "1", "UNAVAILABLE"),
                     ("keras_gd", "1", "READY"), ("keras_gd", "2", "READY"),
                     ("keras_latest2", "2", "READY"), ("keras_latest2", "3", "READY"),
                     ("keras_sm", "3", "READY"),  # latest 1 by default
                     ("keras_static", "1", "READY"), ("keras_static", "3", "READY")]
    assert server.models.ready


def test_a_failed_load_is_unavailable_with_its_error_and_stops_no_other(served):
    server, _ = served
    broken = next(s for s in server.models.index() if s.name == "broken")
    assert "graph_def is not a serialized tensorflow.GraphDef" in broken.reason
    with pytest.raises(Unavailable, match="is UNAVAILABLE: graph_def is not a serialized"):
        server.models.model("broken", "1").infer({"x": np.zeros((1, 4), np.float32)}, None, Context())
    with pytest.raises(Unavailable, match="has no version ready"):
        server.models.model("broken")


@pytest.mark.parametrize("batch", [1, 3, 4])
def test_a_keras_saved_model_without_config_batches_up_to_4_as_tf_computes(served, batch):
    server, built = served
    model = server.models.model("keras_sm")
    assert (model.version, model.platform, model.max_batch_size) == ("3", "tensorflow_savedmodel", 4)
    assert [(t.name, t.datatype, t.shape) for t in model.inputs] == [("x", "FP32", (-1, 4))]
    assert [(t.name, t.datatype, t.shape) for t in model.outputs] == [("output_0", "FP32", (-1, 3))]
    inputs = built["saved"].inputs(batch, seed=batch)
    assert_close(model.infer(inputs, None, Context()), built["saved"].expected(inputs, 3))


def test_the_served_config_of_a_saved_model_is_filled_in_from_its_signature(served):
    config = served[0].models.model("keras_sm").config
    assert (config.name, config.platform, config.backend, config.max_batch_size) == (
        "keras_sm", "tensorflow_savedmodel", "tensorflow", 4)
    assert [(t.name, list(t.dims)) for t in config.input] == [("x", [4])]
    assert [(t.name, list(t.dims)) for t in config.output] == [("output_0", [3])]


@pytest.mark.parametrize("batch", [1, 5, 8])
@pytest.mark.parametrize("version", ["1", "2"])
def test_a_batching_graphdef_answers_each_version_as_tf_computes(served, batch, version):
    server, built = served
    model = server.models.model("keras_gd", version)
    inputs = built["batching"].inputs(batch, seed=batch)
    assert_close(model.infer(inputs, ["Identity"], Context()), built["batching"].expected(inputs, int(version)))


def test_versions_differ_and_no_version_means_the_highest_ready(served):
    server, built = served
    inputs = built["batching"].inputs(2)
    one = server.models.model("keras_gd", "1").infer(inputs, None, Context())["Identity"]
    latest = server.models.model("keras_gd").infer(inputs, None, Context())["Identity"]
    assert server.models.model("keras_gd").version == "2"
    assert not np.allclose(one, latest)


def test_a_static_graphdef_takes_its_configured_shape(served):
    server, built = served
    model = server.models.model("keras_static", "3")
    assert model.max_batch_size == 0 and [t.shape for t in model.inputs] == [(2, 4)]
    inputs = built["static"].inputs(2)
    assert_close(model.infer(inputs, None, Context()), built["static"].expected(inputs, 3))


def test_latest_n_serves_the_n_highest_versions_with_the_configs_max_batch_size(served):
    server, built = served
    model = server.models.model("keras_latest2", "2")
    assert model.max_batch_size == 2
    inputs = built["latest2"].inputs(2)
    assert_close(model.infer(inputs, None, Context()), built["latest2"].expected(inputs, 2))


def test_a_signature_picked_by_parameter_answers_as_tf_computes(served):
    server, built = served
    model = server.models.model("affine")
    assert [t.name for t in model.outputs] == ["output_0"]
    inputs = {"v": np.random.default_rng(0).uniform(-1, 1, (2, 3)).astype(np.float32)}
    assert_close(model.infer(inputs, None, Context()), tf_outputs(built["affine"], "shift", inputs))


def test_unknown_models_and_versions_are_not_found_naming_what_exists(served):
    server, _ = served
    with pytest.raises(NotFound, match=r"no model 'nope'; the models served are \['affine', 'broken'"):
        server.models.model("nope")
    with pytest.raises(NotFound, match=r"model 'keras_static' has no version '2'; its versions are \['1', '3'\]"):
        server.models.model("keras_static", "2")


def test_concurrent_requests_of_different_batches_each_get_their_own_rows(served):
    server, built = served
    model = server.models.model("keras_gd", "2")
    requests = [built["batching"].inputs(1 + i % 8, seed=i) for i in range(32)]
    # As many threads as the execute gate admits (max_concurrent_executes 4 + execute_queue 4): one more could be
    # refused with RESOURCE_EXHAUSTED, as an Execute would be
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda inputs: model.infer(inputs, None, Context(deadline_s=600)), requests))
    for inputs, got in zip(requests, answers):
        assert_close(got, built["batching"].expected(inputs, 2))
