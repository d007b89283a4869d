"""Configs xlacs does not serve as written are refused at load, naming the field or file and what to do: fields it
does not honour, platforms it does not serve, files that are missing or of the other platform, names, dims and
datatypes that do not fit the model. The model is then UNAVAILABLE with that reason; the others serve on."""
from __future__ import annotations

import re
import shutil
import textwrap

import pytest

from tests.model_repository import ModelServer, graphdef_model, saved_model, write_config
from xlacs_server.errors import InvalidRequest, LimitExceeded, NotFound, Unavailable

GRAPHDEF = """
    platform: "tensorflow_graphdef"
    max_batch_size: 8
    input [{ name: "x" data_type: TYPE_FP32 dims: [4] }]
    output [{ name: "Identity" data_type: TYPE_FP32 dims: [3] }]
    """


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """A version directory of each platform to copy from."""
    path = tmp_path_factory.mktemp("sources")
    graphdef_model(path, "gd")
    saved_model(path, "sm")
    return {"graphdef": path / "gd" / "1", "savedmodel": path / "sm" / "1"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ModelServer(tmp_path_factory.mktemp("models")) as running:
        yield running


def model_dir(server, sources, kind: str | None, config: str | None, version: str = "1"):
    """A fresh model directory in the server's repository with a copy of `kind`'s files and `config`."""
    directory = server.models.directory / f"m{len(list(server.models.directory.iterdir()))}"
    if kind is not None:
        shutil.copytree(sources[kind], directory / version)
    if config is not None:
        write_config(directory, config)
    directory.mkdir(exist_ok=True)
    return directory.name


REFUSED = [
    ("graphdef", GRAPHDEF + "instance_group [{ kind: KIND_GPU count: 2 }]",
     "config field instance_group is not honoured by xlacs: remove it"),
    ("graphdef", GRAPHDEF.replace("dims: [4] }", "dims: [4] reshape: { shape: [2, 2] } }"),
     r"config field input\[0\].reshape is not honoured"),
    ("graphdef", GRAPHDEF + "dynamic_batching { preserve_ordering: true }",
     "config field dynamic_batching.preserve_ordering is not honoured"),
    ("graphdef", GRAPHDEF + "dynamic_batching { default_queue_policy { default_timeout_microseconds: 5 } }",
     "config field dynamic_batching.default_queue_policy.default_timeout_microseconds is not honoured"),
    ("graphdef", GRAPHDEF.replace("tensorflow_graphdef", "onnxruntime_onnx"),
     "platform 'onnxruntime_onnx' is not served by xlacs; use one of tensorflow_savedmodel, tensorflow_graphdef"),
    ("graphdef", GRAPHDEF + 'backend: "pytorch"', "backend 'pytorch' is not served by xlacs"),
    ("savedmodel", GRAPHDEF, "has no model.graphdef for platform tensorflow_graphdef \\(it holds model.savedmodel\\)"),
    ("graphdef", None, "is a GraphDef, which does not say which tensors are its inputs and outputs: list them"),
    ("graphdef", GRAPHDEF + 'name: "other"', "config name 'other' differs from the model's directory"),
    ("graphdef", GRAPHDEF.replace("dims: [4]", "dims: [-1]"),
     r"input 'x' has dims \[-1\]; xlacs compiles every shape at load"),
    ("graphdef", GRAPHDEF.replace("TYPE_FP32 dims: [4]", "TYPE_STRING dims: [4]"),
     "input 'x' has datatype 'BYTES': xlacs serves numeric tensors only"),
    ("graphdef", GRAPHDEF + "max_batch_size: {", "is not a ModelConfig"),
    ("graphdef", GRAPHDEF + 'parameters: { key: "TF_GRAPH_TAG" value: { string_value: "x" } }',
     "parameter 'TF_GRAPH_TAG' is not honoured by xlacs; the only one is TF_SIGNATURE_DEF"),
    ("graphdef", GRAPHDEF.replace("dims: [3]", "dims: [5]"),
     r"output 'Identity' has dims \[3\], the config says \[5\]"),
    ("graphdef", GRAPHDEF.replace("output [{ name: \"Identity\" data_type: TYPE_FP32",
                                  "output [{ name: \"Identity\" data_type: TYPE_FP64"),
     "output 'Identity' is FP32, the config says FP64"),
    ("graphdef", GRAPHDEF + "version_policy: { specific: { versions: [1, 4] } }",
     r"version_policy names version\(s\) \[4\] that have no directory; the model's versions are \[1\]"),
    (None, GRAPHDEF, "has no version directory: put the model in"),
    ("graphdef", GRAPHDEF.replace("max_batch_size: 8", "max_batch_size: 0") + "dynamic_batching {}",
     "dynamic_batching needs max_batch_size > 0"),
    ("savedmodel", 'input [{ name: "z" data_type: TYPE_FP32 dims: [4] }]',
     r"the config names input\(s\) \['z'\] that the signature lacks; the signature's inputs are \['x'\]"),
    ("savedmodel", 'max_batch_size: 4 input [{ name: "x" data_type: TYPE_INT32 dims: [4] }]',
     "input 'x' is FP32 in the signature, INT32 in the config"),
    ("savedmodel", 'max_batch_size: 4 input [{ name: "x" data_type: TYPE_FP32 dims: [5] }]',
     r"input 'x' has dims \[5\] in the config, \[4\] in the signature"),
    ("savedmodel", 'max_batch_size: 0 input [{ name: "x" data_type: TYPE_FP32 }]',
     r"input 'x' has dims \[-1, 4\]: xlacs compiles every shape at load; give its dims in config.pbtxt"),
    ("savedmodel", 'parameters: { key: "TF_SIGNATURE_DEF" value: { string_value: "nope" } }',
     "has no signature 'nope'; its signatures are .*'serving_default'"),
]


@pytest.mark.parametrize("kind, config, message", REFUSED)
def test_a_config_xlacs_cannot_serve_is_refused_at_load_naming_what_to_fix(server, sources, kind, config, message):
    name = model_dir(server, sources, kind, config)
    with pytest.raises(InvalidRequest, match=message):
        server.models.load(name)
    statuses = [s for s in server.models.index() if s.name == name]
    assert [s.state for s in statuses] and all(s.state == "UNAVAILABLE" for s in statuses)
    assert any(re.search(message, s.reason) for s in statuses), statuses
    with pytest.raises(Unavailable):
        server.models.model(name)


def test_a_graphdef_whose_config_input_is_of_another_dtype_than_its_placeholder_is_refused(server, sources):
    name = model_dir(server, sources, "graphdef", GRAPHDEF.replace("TYPE_FP32 dims: [4]", "TYPE_INT32 dims: [4]"))
    with pytest.raises(InvalidRequest, match="feed 'x:0' is declared int32 but placeholder 'x' has dtype float32"):
        server.models.load(name)


def test_both_model_files_without_a_platform_ask_for_one(server, sources):
    name = model_dir(server, sources, "graphdef", GRAPHDEF.replace('platform: "tensorflow_graphdef"', ""))
    shutil.copytree(sources["savedmodel"] / "model.savedmodel", server.models.directory / name / "1" /
                    "model.savedmodel")
    with pytest.raises(InvalidRequest, match="holds both of model.savedmodel or model.graphdef: set platform"):
        server.models.load(name)


def test_a_batch_beyond_max_bucket_size_is_refused_naming_the_setting(server, sources):
    name = model_dir(server, sources, "graphdef", GRAPHDEF.replace("max_batch_size: 8", "max_batch_size: 100"))
    with pytest.raises(LimitExceeded, match="max_bucket_size=64"):
        server.models.load(name)


@pytest.mark.parametrize("name", ["nope", "../models", "."])
def test_loading_a_name_that_is_no_model_directory_is_not_found(server, name):
    with pytest.raises(NotFound, match=f"no model '{name}' in the model repository"):
        server.models.load(name)


def test_a_refused_model_loads_once_its_config_is_fixed(server, sources):
    name = model_dir(server, sources, "graphdef", GRAPHDEF + "instance_group [{ kind: KIND_CPU }]")
    with pytest.raises(InvalidRequest):
        server.models.load(name)
    (server.models.directory / name / "config.pbtxt").write_text(textwrap.dedent(GRAPHDEF))
    server.models.load(name)
    assert server.models.model(name).state == "READY"
