"""A model's config (Triton's inference.ModelConfig, config.pbtxt or the load call's JSON): read, checked against what
xlacs honours, and its version policy applied. A field xlacs does not honour is refused, named, rather than ignored:
a config that asks for something the daemon would not do must not load as if it did."""
from __future__ import annotations

import pathlib

from google.protobuf import json_format, text_format
from google.protobuf.message import Message

from xlacs_server.errors import InvalidRequest
from xlacs_server.models.v2 import model_config_pb2

CONFIG_FILE = "config.pbtxt"
SAVED_MODEL = "tensorflow_savedmodel"
GRAPHDEF = "tensorflow_graphdef"
PLATFORMS = {SAVED_MODEL: "model.savedmodel", GRAPHDEF: "model.graphdef"}  # platform -> its default file name
BACKEND = "tensorflow"  # Triton's backend of both platforms
SIGNATURE_PARAMETER = "TF_SIGNATURE_DEF"

# The fields xlacs honours, by message: any other field set is refused. A message listed as a field's value is
# checked field by field too.
HONOURED = {
    "inference.ModelConfig": {"name", "platform", "backend", "version_policy", "max_batch_size", "input", "output",
                              "dynamic_batching", "default_model_filename", "parameters"},
    "inference.ModelVersionPolicy": {"latest", "all", "specific"},
    "inference.ModelVersionPolicy.Latest": {"num_versions"},
    "inference.ModelVersionPolicy.All": set(),
    "inference.ModelVersionPolicy.Specific": {"versions"},
    "inference.ModelInput": {"name", "data_type", "dims"},
    "inference.ModelOutput": {"name", "data_type", "dims"},
    "inference.ModelDynamicBatching": {"preferred_batch_size", "max_queue_delay_microseconds",
                                       "default_queue_policy"},
    "inference.ModelQueuePolicy": {"max_queue_size"},
    "inference.ModelParameter": {"string_value"},
}


def read(model_dir: pathlib.Path, config_json: str = "", *, name: str | None = None,
         named: str = "directory") -> model_config_pb2.ModelConfig:
    """The model's config: `config_json` when given (it replaces config.pbtxt, as Triton's load does), else
    config.pbtxt, else an empty one (a SavedModel's signature fills it in); checked. The model's name is its
    directory's, or `name` (which the config's must equal; `named` says where it is given)."""
    config = model_config_pb2.ModelConfig()
    path = model_dir / CONFIG_FILE
    try:
        if config_json:
            json_format.Parse(config_json, config)
        elif path.is_file():
            text_format.Parse(path.read_text(), config)
    except (json_format.ParseError, text_format.ParseError, UnicodeDecodeError) as e:
        source = "the load call's config" if config_json else str(path)
        raise InvalidRequest(f"{source} is not a ModelConfig (model_config.proto): {e}") from None
    check(config, name or model_dir.name, named)
    return config


def check(config: model_config_pb2.ModelConfig, name: str, named: str = "directory") -> None:
    """InvalidRequest naming what in `config` xlacs does not honour or what is wrong with it."""
    check_fields(config, HONOURED, "config field", "docs/model_repository.md")
    if config.name and config.name != name:
        raise InvalidRequest(f"config name {config.name!r} differs from the model's {named} {name!r}: they must "
                             "match (or leave name out)")
    if config.platform and config.platform not in PLATFORMS:
        raise InvalidRequest(f"model {name!r}: platform {config.platform!r} is not served by xlacs; use one of "
                             f"{', '.join(PLATFORMS)}")
    if config.backend and config.backend != BACKEND:
        raise InvalidRequest(f"model {name!r}: backend {config.backend!r} is not served by xlacs; use "
                             f"{BACKEND!r} (or leave backend out)")
    if config.max_batch_size < 0:
        raise InvalidRequest(f"model {name!r}: max_batch_size {config.max_batch_size} is negative")
    for key in config.parameters:
        if key != SIGNATURE_PARAMETER:
            raise InvalidRequest(f"model {name!r}: parameter {key!r} is not honoured by xlacs; the only one is "
                                 f"{SIGNATURE_PARAMETER}")
    for tensors, what in ((config.input, "input"), (config.output, "output")):
        for tensor in tensors:
            if not tensor.name:
                raise InvalidRequest(f"model {name!r}: an {what} has no name")
            if any(d < 1 for d in tensor.dims):
                raise InvalidRequest(f"model {name!r}: {what} {tensor.name!r} has dims {list(tensor.dims)}; xlacs "
                                     "compiles every shape at load: give each dim a size (the batch dim, left out "
                                     "of dims, is the one of unknown size with max_batch_size > 0)")
    if config.HasField("dynamic_batching") and config.max_batch_size == 0:
        raise InvalidRequest(f"model {name!r}: dynamic_batching needs max_batch_size > 0")


def check_fields(message: Message, honoured: dict[str, set[str]], what: str, doc: str, path: str = "") -> None:
    """InvalidRequest naming the first field set in `message` that `honoured` (the fields honoured, by message
    name) leaves out, as "<what> <path> is not honoured by xlacs"; `doc` lists those honoured."""
    allowed = honoured.get(message.DESCRIPTOR.full_name)
    for field, value in message.ListFields():
        where = f"{path}.{field.name}" if path else field.name
        if allowed is None or field.name not in allowed:
            raise InvalidRequest(f"{what} {where} is not honoured by xlacs: remove it (the fields xlacs honours are "
                                 f"in {doc})")
        if field.message_type is None:
            continue
        if isinstance(value, Message):
            check_fields(value, honoured, what, doc, where)
        elif field.message_type.GetOptions().map_entry:
            for key, item in value.items():
                if isinstance(item, Message):
                    check_fields(item, honoured, what, doc, f"{where}[{key!r}]")
        else:
            for i, item in enumerate(value):
                check_fields(item, honoured, what, doc, f"{where}[{i}]")


def signature_key(config: model_config_pb2.ModelConfig, default: str) -> str:
    parameter = config.parameters.get(SIGNATURE_PARAMETER)
    return parameter.string_value if parameter is not None and parameter.string_value else default


def versions(config: model_config_pb2.ModelConfig, available: list[int]) -> list[int]:
    """The versions the policy serves among `available` (ascending): latest 1 by default."""
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        return list(available)
    if choice == "specific":
        missing = sorted(set(policy.specific.versions) - set(available))
        if missing:
            raise InvalidRequest(f"version_policy names version(s) {missing} that have no directory; the model's "
                                 f"versions are {available or 'none'}")
        return sorted(set(policy.specific.versions))
    count = policy.latest.num_versions if choice == "latest" else 1
    if count < 1:
        raise InvalidRequest("version_policy latest needs num_versions >= 1")
    return available[-count:]
