"""A model version's files as xlacs compiles them: the GraphDef (a frozen model.graphdef, or a SavedModel signature
frozen by the client's reader, xlacs.saved_model, without TensorFlow) and the config's inputs and outputs bound to
the graph's tensors. The config as served is filled in from the signature where config.pbtxt leaves it out."""
from __future__ import annotations

import dataclasses
import pathlib

import numpy as np
from xlacs.saved_model import DEFAULT_SIGNATURE, SavedModel, SavedModelError
from xlacs.v1 import tf_saved_model_pb2

from xlacs_server.errors import InvalidRequest, LimitExceeded
from xlacs_server.graph.ir import Endpoint
from xlacs_server.models.v2 import model_config_pb2
from xlacs_server.models import config as configs
from xlacs_server.models import datatypes, examples

SAVED_MODEL_FILE = "saved_model.pb"  # a SavedModel directory's graph: a version directory holding it is the SavedModel
# A SavedModel without a config whose signature's inputs and outputs all have an unknown first dim is served as
# batching, up to this many (Triton's default-max-batch-size for the models it completes the config of).
DEFAULT_MAX_BATCH_SIZE = 4
UNKNOWN = -1
TENSORFLOWS_OWN = "__saved_model_"  # the prefix of TensorFlow's own signatures (its init op's), not models' functions


@dataclasses.dataclass(frozen=True)
class Binding:
    """A config input or output and the graph's tensor it names ("node:index"); dims leave out the batch dim.
    An output's dtype and dims are None where the config leaves them to the compile."""
    name: str
    tensor: str
    dtype: np.dtype | None
    dims: tuple[int, ...] | None


@dataclasses.dataclass
class Source:
    graph_def: bytes
    inputs: list[Binding]
    outputs: list[Binding]
    config: model_config_pb2.ModelConfig  # as served: platform, max_batch_size and inputs filled in
    signature_key: str = DEFAULT_SIGNATURE  # the signature served (a GraphDef's inputs and outputs are one)
    # A SavedModel's SignatureDefs by key, every one of them (TF Serving's model metadata lists them); a GraphDef has
    # none of its own.
    signature_defs: dict[str, tf_saved_model_pb2.SignatureDef] = dataclasses.field(default_factory=dict)
    # A SavedModel's other signatures, which TF Serving's Predict runs too (TensorFlow's own, "__saved_model_*", left
    # out): each read as a Source of its own, or the InvalidRequest saying why xlacs does not serve it.
    others: dict[str, Source | InvalidRequest] = dataclasses.field(default_factory=dict)
    # A signature fed serialized tf.Examples: compiled from its ParseExample's dense features (models/examples.py).
    examples: examples.ExampleSignature | None = None


def read(version_dir: pathlib.Path, config: model_config_pb2.ModelConfig, max_graph_bytes: int) -> Source:
    """The version's graph and bindings; InvalidRequest naming the file or config field that is wrong."""
    config = _copy(config)  # filled in below
    config.name = config.name or version_dir.parent.name
    platform = config.platform or _platform(version_dir, config)
    config.platform, config.backend = platform, configs.BACKEND
    path = version_dir / (config.default_model_filename or configs.PLATFORMS[platform])
    if platform == configs.SAVED_MODEL and not path.exists() and _tf_serving_layout(version_dir, config):
        path = version_dir
    if not path.exists():
        found = ", ".join(sorted(p.name for p in version_dir.iterdir())) or "nothing"
        wanted = path.name + (f" or {SAVED_MODEL_FILE}" if platform == configs.SAVED_MODEL and
                              not config.default_model_filename else "")
        raise InvalidRequest(f"{version_dir} has no {wanted} for platform {platform} (it holds {found})")
    if platform == configs.GRAPHDEF:
        return _graphdef(path, config, max_graph_bytes)
    return _saved_model(path, config)


def _platform(version_dir: pathlib.Path, config: model_config_pb2.ModelConfig) -> str:
    """The platform of the model file found in the version directory, when the config names none."""
    found = [platform for platform, default in configs.PLATFORMS.items()
             if (version_dir / (config.default_model_filename or default)).exists()
             or platform == configs.SAVED_MODEL and _tf_serving_layout(version_dir, config)]
    if len(found) != 1:
        files = " or ".join(configs.PLATFORMS.values())
        raise InvalidRequest(f"{version_dir} holds {'both' if found else 'neither'} of {files}: set platform in "
                             f"config.pbtxt ({' or '.join(configs.PLATFORMS)}) and give the model's file")
    return found[0]


def _tf_serving_layout(version_dir: pathlib.Path, config: model_config_pb2.ModelConfig) -> bool:
    """The version directory is the SavedModel itself (TF Serving's layout, BASE/<version>/saved_model.pb), where
    the config names no file."""
    return not config.default_model_filename and (version_dir / SAVED_MODEL_FILE).is_file()


def _graphdef(path: pathlib.Path, config: model_config_pb2.ModelConfig, max_graph_bytes: int) -> Source:
    if not config.input or not config.output:
        raise InvalidRequest(f"model {config.name!r} is a GraphDef, which does not say which tensors are its inputs "
                             "and outputs: list them (input, output) in config.pbtxt")
    if not path.is_file():
        raise InvalidRequest(f"{path} is not a file: a tensorflow_graphdef model is a frozen GraphDef file")
    size = path.stat().st_size
    if size > max_graph_bytes:
        raise LimitExceeded(f"{path} has {size} bytes", "max_graph_bytes", max_graph_bytes)
    inputs = [Binding(t.name, str(Endpoint.parse(t.name)), _dtype(t, "input"), tuple(t.dims)) for t in config.input]
    outputs = [Binding(t.name, str(Endpoint.parse(t.name)), _dtype(t, "output"), tuple(t.dims))
               for t in config.output]
    return Source(path.read_bytes(), inputs, outputs, config)


def _saved_model(path: pathlib.Path, config: model_config_pb2.ModelConfig) -> Source:
    key = configs.signature_key(config, DEFAULT_SIGNATURE)
    try:
        saved = SavedModel(path)
        cut = examples.read(saved, key)
        signature = cut[0] if cut else saved.signature(key)
    except SavedModelError as e:
        raise InvalidRequest(f"model {config.name!r}: {e}") from None
    specs = list(signature.inputs.items()) + list(signature.outputs.items())
    if not config.input and not config.output and config.max_batch_size == 0 and all(
            s.shape and s.shape[0] == UNKNOWN for _, s in specs):
        config.max_batch_size = DEFAULT_MAX_BATCH_SIZE
    inputs = _bind(config, config.input, signature.inputs, "input")
    outputs = _bind(config, config.output, signature.outputs, "output")
    if not config.input:
        config.input.extend(model_config_pb2.ModelInput(
            name=b.name, data_type=datatypes.to_config(datatypes.from_numpy(b.dtype)), dims=b.dims) for b in inputs)
    # Copies: a reference into the MetaGraphDef would keep all of it (its graph and functions) alive.
    defs = {k: tf_saved_model_pb2.SignatureDef.FromString(d.SerializeToString())
            for k, d in saved.meta_graph.signature_def.items()}
    others = {k: _other(saved, k, config) for k in sorted(defs) if k != key and not k.startswith(TENSORFLOWS_OWN)}
    return Source(signature.graph_def, inputs, outputs, config, key, defs, others, cut and cut[1])


def _other(saved: SavedModel, key: str, config: model_config_pb2.ModelConfig) -> Source | InvalidRequest:
    """A signature besides the one the config serves: batching (up to the model's max_batch_size, or
    DEFAULT_MAX_BATCH_SIZE where the model does not batch) when each of its inputs and outputs has an unknown first
    dim, else of the signature's shapes. The config names none of its tensors: its inputs' shapes must be known."""
    try:
        cut = examples.read(saved, key)
        signature = cut[0] if cut else saved.signature(key)
    except SavedModelError as e:
        return InvalidRequest(str(e))
    specs = [*signature.inputs.items(), *signature.outputs.items()]
    batched = bool(signature.inputs) and all(s.shape and s.shape[0] == UNKNOWN for _, s in specs)
    served = _copy(config)
    served.max_batch_size = (config.max_batch_size or DEFAULT_MAX_BATCH_SIZE) if batched else 0
    del served.input[:], served.output[:]
    bindings = {"input": [], "output": []}
    for what, tensors in (("input", signature.inputs), ("output", signature.outputs)):
        for name, spec in tensors.items():
            dims = None if spec.shape is None else spec.shape[1:] if batched else spec.shape
            if what == "input" and (dims is None or UNKNOWN in dims):
                shape = "no known rank" if dims is None else f"shape {list(spec.shape)}"
                return InvalidRequest(f"signature {key!r}: input {name!r} has {shape}: xlacs compiles every shape at "
                                      "load, and serves a signature the config does not name only where its inputs' "
                                      "shapes are known (the batch dim aside, when every input and output has one)")
            known = dims is not None and UNKNOWN not in dims
            bindings[what].append(Binding(name, spec.tensor, spec.dtype, dims if known else None))
    return Source(signature.graph_def, bindings["input"], bindings["output"], served, key, examples=cut and cut[1])


def _bind(config: model_config_pb2.ModelConfig, given, specs: dict, what: str) -> list[Binding]:
    """The signature's inputs or outputs as bindings: all of them, or those the config lists (whose names must be
    the signature's keys, and whose dtypes and dims must fit it)."""
    by_name = {t.name: t for t in given}
    unknown = sorted(set(by_name) - set(specs))
    missing = sorted(set(specs) - set(by_name)) if what == "input" and by_name else []
    if unknown or missing:
        problem = f"names {what}(s) {unknown} that the signature lacks" if unknown else \
            f"leaves out the signature's input(s) {missing}"
        raise InvalidRequest(f"model {config.name!r}: the config {problem}; the signature's {what}s are "
                             f"{sorted(specs)}")
    bindings = []
    for name, spec in specs.items():
        if by_name and name not in by_name:
            continue  # an output the config does not serve
        tensor = by_name.get(name)
        where = f"model {config.name!r}: {what} {name!r}"
        if spec.shape is None:
            raise InvalidRequest(f"{where} has no known rank in the signature; xlacs needs its shape")
        shape = spec.shape
        if config.max_batch_size:
            if not shape or shape[0] != UNKNOWN:
                raise InvalidRequest(f"{where} has shape {list(shape)} in the signature: with max_batch_size > 0 "
                                     "its first dim must be the batch dim, of unknown size; set max_batch_size 0")
            shape = shape[1:]
        dtype = spec.dtype
        if tensor is not None and tensor.data_type != model_config_pb2.TYPE_INVALID:
            dtype = _dtype(tensor, what)
            if dtype != spec.dtype:
                raise InvalidRequest(f"{where} is {datatypes.from_numpy(spec.dtype)} in the signature, "
                                     f"{datatypes.from_config(tensor.data_type)} in the config")
        dims = tuple(tensor.dims) if tensor is not None and tensor.dims else shape
        if len(dims) != len(shape) or any(s != UNKNOWN and d != s for d, s in zip(dims, shape)):
            raise InvalidRequest(f"{where} has dims {list(dims)} in the config, {list(shape)} in the signature "
                                 f"(without the batch dim: max_batch_size {config.max_batch_size})")
        if what == "input" and UNKNOWN in dims:
            raise InvalidRequest(f"{where} has dims {list(dims)}: xlacs compiles every shape at load; give its dims "
                                 "in config.pbtxt")
        bindings.append(Binding(name, spec.tensor, dtype, dims if UNKNOWN not in dims else None))
    return bindings


def _dtype(tensor, what: str) -> np.dtype:
    if tensor.data_type == model_config_pb2.TYPE_INVALID:
        raise InvalidRequest(f"{what} {tensor.name!r} has no data_type in the config")
    return datatypes.to_numpy(datatypes.from_config(tensor.data_type), f"{what} {tensor.name!r}")


def _copy(config: model_config_pb2.ModelConfig) -> model_config_pb2.ModelConfig:
    copy = model_config_pb2.ModelConfig()
    copy.CopyFrom(config)
    return copy
