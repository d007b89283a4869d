"""A model repository served by one daemon for the module's tests, driven with TensorFlow Serving's official client
(tensorflow-serving-api, in its own venv: tests/tfserving/client.py)."""
from __future__ import annotations

import dataclasses
import pathlib
import shutil

import pytest

from tests.model_repository import Built, ModelServer, failing_model, graphdef_model, saved_model, write_config
from tests.saved_model.models import saved


@dataclasses.dataclass
class Repository:
    path: pathlib.Path
    saved: Built  # "keras_sm": a Keras SavedModel, versions 1 and 2 both served, batching up to 4 with a batcher
    graphdef: Built  # "keras_gd": a frozen GraphDef, max_batch_size 8 (its signature is made from the config)
    affine: pathlib.Path  # "affine": a tf.Module's SavedModel: x -> y, total; a second signature "shift"
    lookup: pathlib.Path  # "lookup": ids (int32) -> sum; a second signature "bump", which assigns a variable
    signatures: pathlib.Path  # "signatures": serving_default, "scale" (two inputs, a batch) and "pair" (no batch)
    broken: str  # "broken": its load fails


def _copy(source: pathlib.Path, repo: pathlib.Path, name: str) -> pathlib.Path:
    shutil.copytree(source, repo / name / "1" / "model.savedmodel")
    return source


def _signatures(repo: pathlib.Path) -> pathlib.Path:
    """Three signatures, served batching up to 4 with a batcher: each batching signature gets one."""
    write_config(repo / "signatures", """
        max_batch_size: 4
        dynamic_batching { max_queue_delay_microseconds: 5000 }
        """)
    return _copy(saved("signatures"), repo, "signatures")


@pytest.fixture(scope="session")
def tfs_repository(tmp_path_factory) -> Repository:
    path = tmp_path_factory.mktemp("tfs-models")
    return Repository(
        path,
        saved_model(path, "keras_sm", versions=(1, 2), config="""
            max_batch_size: 4
            version_policy: { all {} }
            dynamic_batching { max_queue_delay_microseconds: 5000 }
            """),
        graphdef_model(path, "keras_gd"),
        _copy(saved("affine"), path, "affine"),
        _copy(saved("lookup"), path, "lookup"),
        _signatures(path),
        failing_model(path, "broken"))


@pytest.fixture(scope="module")
def tfs_server(tfs_repository):
    with ModelServer(tfs_repository.path) as server:
        yield server
