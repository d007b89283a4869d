"""TensorFlow Serving's own models (docs/tf_serving.md, TF Serving's layout): a ModelServerConfig, the models.config of
`tensorflow_model_server --model_config_file`, or the one model of --model_base_path, read into the models the
repository serves, each from a base path of its own (BASE/<version>/saved_model.pb) with its version policy and
labels. Checks and messages are TF Serving's (tensorflow_serving/model_servers/server_core.cc); a field xlacs does
not honour is refused, named, as in a Triton config (config.py)."""
from __future__ import annotations

import dataclasses
import pathlib
import re

from google.protobuf import text_format

from xlacs_server.errors import InvalidRequest
from xlacs_server.models import config as configs
from xlacs_server.models.tfs import model_server_config_pb2
from xlacs_server.models.v2 import model_config_pb2

PLATFORM = "tensorflow"  # model_platform: TF Serving's SavedModels
DEFAULT_NAME = "default"  # the model of --model_base_path without --model_name, as TF Serving names it
_POLICY = "tensorflow.serving.FileSystemStoragePathSourceConfig.ServableVersionPolicy"
HONOURED = {
    "tensorflow.serving.ModelServerConfig": {"model_config_list"},
    "tensorflow.serving.ModelConfigList": {"config"},
    "tensorflow.serving.ModelConfig": {"name", "base_path", "model_platform", "model_version_policy",
                                       "version_labels"},
    _POLICY: {"latest", "all", "specific"},
    f"{_POLICY}.Latest": {"num_versions"},
    f"{_POLICY}.All": set(),
    f"{_POLICY}.Specific": {"versions"},
}
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclasses.dataclass(frozen=True)
class Declared:
    """A model of the ModelServerConfig: its versions are the numeric directories of base_path, `policy` picks those
    served (Triton's ModelVersionPolicy, whose choices are TF Serving's), `labels` name versions."""
    name: str
    base_path: pathlib.Path
    policy: model_config_pb2.ModelVersionPolicy
    labels: dict[str, int]


def read_file(path: str) -> model_server_config_pb2.ModelServerConfig:
    """The ModelServerConfig in protobuf text at `path`; InvalidRequest naming the file and line that does not parse."""
    config = model_server_config_pb2.ModelServerConfig()
    try:
        text_format.Parse(pathlib.Path(path).expanduser().read_text(), config)
    except text_format.ParseError as e:
        what = str(e).split(" : ", 1)[-1]
        raise InvalidRequest(f"{path} line {e.GetLine()}, column {e.GetColumn()}: {what} (a models.config is a "
                             "tensorflow.serving.ModelServerConfig in protobuf text)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidRequest(f"cannot read the model config file {path}: {e}") from None
    return config


def single(name: str, base_path: str) -> model_server_config_pb2.ModelServerConfig:
    """The config of --model_name and --model_base_path (TF Serving's BuildSingleModelConfig)."""
    config = model_server_config_pb2.ModelServerConfig()
    config.model_config_list.config.add(name=name or DEFAULT_NAME, base_path=base_path, model_platform=PLATFORM)
    return config


def declared(config: model_server_config_pb2.ModelServerConfig, where: str) -> dict[str, Declared]:
    """The models of `config` by name, in its order, checked as TF Serving checks them (ValidateModelConfigList,
    GetPlatform); `where` names the config in messages. An empty config has none."""
    configs.check_fields(config, HONOURED, f"{where}: field", "docs/tf_serving.md")
    models: dict[str, Declared] = {}
    for model in config.model_config_list.config:
        name = model.name
        if not name:
            raise InvalidRequest(f"{where}: a model has no name")
        if name in models:
            raise InvalidRequest(f"Illegal to list model {name} multiple times in config list")
        if not model.model_platform:
            raise InvalidRequest("Illegal setting neither ModelServerConfig::model_type (deprecated) nor "
                                 f"ModelServerConfig::model_platform, model name is {name}")
        if model.model_platform != PLATFORM:
            raise InvalidRequest(f"Model {name} requests unsupported platform {model.model_platform} (xlacs serves "
                                 f'TensorFlow SavedModels: model_platform "{PLATFORM}")')
        if _URI.match(model.base_path):
            raise InvalidRequest(f"model {name}: base_path {model.base_path} is a URI; xlacs reads base paths on "
                                 "the daemon's file system only: give an absolute path")
        if not pathlib.PurePath(model.base_path).is_absolute():
            raise InvalidRequest(f"Expected model {name} to have an absolute path or URI; got "
                                 f"base_path()={model.base_path}")
        models[name] = Declared(name, pathlib.Path(model.base_path), _policy(model), dict(model.version_labels))
    return models


def _policy(model: model_server_config_pb2.ModelConfig) -> model_config_pb2.ModelVersionPolicy:
    """TF Serving's ServableVersionPolicy as Triton's (the same three choices): latest 1 by default, and for
    num_versions 0, as TF Serving reads it."""
    given = model.model_version_policy
    policy = model_config_pb2.ModelVersionPolicy()
    choice = given.WhichOneof("policy_choice")
    if choice == "all":
        policy.all.SetInParent()
    elif choice == "specific":
        policy.specific.versions.extend(given.specific.versions)
    else:
        policy.latest.num_versions = max(given.latest.num_versions, 1)
    return policy


def model_config(model: Declared, config_json: str = "") -> model_config_pb2.ModelConfig:
    """The model's config as a repository model's: a SavedModel (platform tensorflow_savedmodel) whose inputs and
    outputs are its signature's, or what BASE/config.pbtxt (Triton's, optional) or the load call's `config_json` sets,
    with the version policy of the ModelServerConfig, which they must leave to it."""
    config = configs.read(model.base_path, config_json, name=model.name, named="name in the model server config")
    if config.HasField("version_policy"):
        source = "the load call's config" if config_json else str(model.base_path / configs.CONFIG_FILE)
        raise InvalidRequest(f"model {model.name!r}: {source} sets version_policy; a TF Serving model's versions are "
                             "its model_version_policy in the model server config: remove it")
    if config.platform and config.platform != configs.SAVED_MODEL:
        raise InvalidRequest(f"model {model.name!r}: platform {config.platform!r}; a TF Serving model is a SavedModel "
                             f"in each version directory ({configs.SAVED_MODEL})")
    config.name, config.platform = model.name, configs.SAVED_MODEL
    config.version_policy.CopyFrom(model.policy)
    return config


def versions(model: Declared, available: list[int]) -> list[int]:
    """The versions the policy serves among `available` (ascending), as TF Serving picks them: a specific version
    that is not on disk is left out (TF Serving logs it); InvalidRequest when none is left."""
    policy = model.policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        chosen = list(available)
    elif choice == "specific":
        chosen = sorted(set(policy.specific.versions) & set(available))
    else:
        chosen = available[-policy.latest.num_versions:] if available else []
    if not chosen:
        wanted = f" of the versions {sorted(set(policy.specific.versions))} its policy names" \
            if choice == "specific" else ""
        raise InvalidRequest(f"model {model.name!r} has no version{wanted} in {model.base_path} (its versions: "
                             f"{available or 'none'}): a version is a SavedModel in a numbered directory, "
                             f"{model.base_path}/1/saved_model.pb")
    return chosen
