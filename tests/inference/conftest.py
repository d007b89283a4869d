"""A model repository with one model of each kind, served by one daemon for the module's tests (the protocol's
tests read it; a test that loads or unloads models starts a ModelServer of its own)."""
from __future__ import annotations

import dataclasses
import pathlib

import pytest

from tests.model_repository import Built, ModelServer, failing_model, graphdef_model, saved_model


@dataclasses.dataclass
class Repository:
    path: pathlib.Path
    saved: Built  # "keras_sm": a Keras SavedModel, no config.pbtxt (batching up to 4), versions 1 and 2 (2 served)
    batching: Built  # "keras_gd": a frozen GraphDef, max_batch_size 8
    static: Built  # "keras_static": a frozen GraphDef, max_batch_size 0, input [2, 4]
    broken: str  # "broken": a model whose load fails (UNAVAILABLE), its name


@pytest.fixture(scope="session")
def model_repository(tmp_path_factory) -> Repository:
    path = tmp_path_factory.mktemp("models")
    return Repository(path, saved_model(path, "keras_sm", versions=(1, 2)), graphdef_model(path, "keras_gd"),
                      graphdef_model(path, "keras_static", max_batch_size=0), failing_model(path, "broken"))


@pytest.fixture(scope="module")
def model_server(model_repository):
    with ModelServer(model_repository.path) as server:
        yield server
