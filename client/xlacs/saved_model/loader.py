"""Reads a SavedModel directory without TensorFlow and freezes one of its signatures into a GraphDef with named
feeds and fetches (docs/saved_model.md).

A SavedModel directory holds saved_model.pb (a SavedModel proto: MetaGraphDefs, each with its graph and function
library, its SignatureDefs and its object graph) and variables/, a TensorBundle of the variables' values keyed by
checkpoint key. A variable that a signature's function captures is a node of the object graph; the checkpoint's
own object graph, stored in the bundle, names the same objects by the same paths of child names from the root
and gives each variable's checkpoint key."""
from __future__ import annotations

import dataclasses
import functools
import pathlib

import numpy as np
from google.protobuf.message import DecodeError

from xlacs import dtypes
from xlacs.saved_model.bundle import OBJECT_GRAPH_KEY, Bundle, BundleError
from xlacs.saved_model.freeze import Freezer, FreezeError
from xlacs.v1 import tf_saved_model_pb2 as saved_model_pb2

DEFAULT_SIGNATURE = "serving_default"
SERVING_TAG = "serve"
VARIABLE_VALUE = "VARIABLE_VALUE"


class SavedModelError(ValueError):
    """A directory that is not a SavedModel xlacs reads, or a signature it does not have."""


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """A signature's input or output: the tensor it names in the graph ("node:index"), its dtype and shape
    (-1 for a dimension known only when it runs)."""
    tensor: str
    dtype: np.dtype
    shape: tuple[int, ...] | None


@dataclasses.dataclass
class Signature:
    """A signature frozen into a GraphDef (serialized); inputs and outputs by their SignatureDef names, sorted."""
    key: str
    graph_def: bytes
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]


def _spec(name: str, info: saved_model_pb2.TensorInfo) -> TensorSpec:
    if info.WhichOneof("encoding") != "name":
        raise SavedModelError(f"signature tensor {name!r} is a sparse or composite tensor; xlacs takes dense "
                              "tensors only")
    try:
        dtype = dtypes.to_numpy(info.dtype)
    except dtypes.UnsupportedDType as e:
        raise SavedModelError(f"signature tensor {name!r} has {e}") from None
    shape = None if info.tensor_shape.unknown_rank else tuple(d.size for d in info.tensor_shape.dim)
    return TensorSpec(info.name, dtype, shape)


def read_saved_model(directory: str | pathlib.Path) -> saved_model_pb2.SavedModel:
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        raise SavedModelError(f"{directory} is not a directory; a SavedModel is a directory holding saved_model.pb "
                              "and variables/")
    path = directory / "saved_model.pb"
    if not path.is_file():
        found = ", ".join(sorted(p.name for p in directory.iterdir())[:8]) or "nothing"
        raise SavedModelError(f"{directory} has no saved_model.pb (it holds {found}); write the model with "
                              "tf.saved_model.save or Keras model.export()")
    try:
        model = saved_model_pb2.SavedModel.FromString(path.read_bytes())
    except DecodeError:
        raise SavedModelError(f"{path} is not a SavedModel protobuf") from None
    if not model.meta_graphs:
        raise SavedModelError(f"{path} holds no MetaGraphDef (is it a GraphDef? compile it as a .pb file)")
    return model


def meta_graph(model: saved_model_pb2.SavedModel, path) -> saved_model_pb2.MetaGraphDef:
    """The MetaGraphDef tagged "serve", or the only one."""
    for graph in model.meta_graphs:
        if SERVING_TAG in graph.meta_info_def.tags or len(model.meta_graphs) == 1:
            return graph
    tags = [list(g.meta_info_def.tags) for g in model.meta_graphs]
    raise SavedModelError(f"{path} has no MetaGraphDef tagged {SERVING_TAG!r}; its tags are {tags}")


def checkpoint_keys(saved: saved_model_pb2.SavedObjectGraph,
                    checkpoint: saved_model_pb2.TrackableObjectGraph) -> dict[int, str]:
    """{saved object graph node: checkpoint key} of every variable, matching the two graphs' nodes by the path
    of child names that reaches them from the root."""
    keys: dict[int, str] = {}
    pending, seen = [(0, 0)], set()
    while pending:
        ours, theirs = pending.pop()
        if ours in seen or ours >= len(saved.nodes) or theirs >= len(checkpoint.nodes):
            continue
        seen.add(ours)
        for attribute in checkpoint.nodes[theirs].attributes:
            if attribute.name == VARIABLE_VALUE:
                keys[ours] = attribute.checkpoint_key
        children = {c.local_name: c.node_id for c in checkpoint.nodes[theirs].children}
        pending.extend((c.node_id, children[c.local_name]) for c in saved.nodes[ours].children
                       if c.local_name in children)
    return keys


class SavedModel:
    """A SavedModel directory, read without TensorFlow."""

    def __init__(self, directory: str | pathlib.Path):
        self.directory = pathlib.Path(directory)
        self.meta_graph = meta_graph(read_saved_model(self.directory), self.directory / "saved_model.pb")

    @property
    def signature_keys(self) -> list[str]:
        return sorted(self.meta_graph.signature_def)

    @functools.cached_property
    def bundle(self) -> Bundle:
        return Bundle(self.directory / "variables" / "variables")

    @functools.cached_property
    def checkpoint_keys(self) -> dict[int, str]:
        checkpoint = saved_model_pb2.TrackableObjectGraph()
        try:
            checkpoint.ParseFromString(self.bundle.string(OBJECT_GRAPH_KEY))
        except DecodeError:
            raise SavedModelError(f"the checkpoint object graph in {self.bundle.prefix} does not parse") from None
        return checkpoint_keys(self.meta_graph.object_graph_def, checkpoint)

    def variable(self, node_id: int) -> np.ndarray:
        """The checkpoint value of the variable at object graph node `node_id`."""
        key = self.checkpoint_keys.get(node_id)
        if key is None:
            raise SavedModelError(f"object graph node {node_id} is captured by a signature but has no value in "
                                  f"the checkpoint {self.bundle.prefix}")
        value = self.bundle.tensor(key)
        nodes = self.meta_graph.object_graph_def.nodes
        if nodes[node_id].HasField("variable"):
            declared = nodes[node_id].variable
            shape = tuple(d.size for d in declared.shape.dim)
            if declared.dtype != dtypes.from_numpy(value.dtype) or (not declared.shape.unknown_rank and
                                                                     shape != value.shape):
                raise SavedModelError(f"variable {declared.name or key!r} is {dtypes.dtype_name(declared.dtype)}"
                                      f"{list(shape)} in the object graph but {value.dtype}{list(value.shape)} in "
                                      f"the checkpoint ({key!r})")
        return value

    def signature(self, key: str = DEFAULT_SIGNATURE) -> Signature:
        """The signature `key`, frozen: its variables become Consts of their checkpoint values."""
        signature_def = self.meta_graph.signature_def.get(key)
        if signature_def is None:
            raise SavedModelError(f"{self.directory} has no signature {key!r}; its signatures are "
                                  f"{', '.join(map(repr, self.signature_keys)) or 'none'}")
        inputs = {name: _spec(name, info) for name, info in sorted(signature_def.inputs.items())}
        outputs = {name: _spec(name, info) for name, info in sorted(signature_def.outputs.items())}
        return Signature(key, self.freeze([s.tensor for s in outputs.values()], key), inputs, outputs)

    def freeze(self, fetches: list[str], key: str) -> bytes:
        """The serialized GraphDef of what `fetches` (tensors of signature `key`) need, variables frozen: a
        TensorFlow 2 graph's captured by its functions, a TensorFlow 1 graph's (no object graph) by their name."""
        bound_inputs = {name: list(f.bound_inputs)
                        for name, f in self.meta_graph.object_graph_def.concrete_functions.items()}
        graph_value = None if self.meta_graph.object_graph_def.nodes else lambda key: self.bundle.tensor(key)
        try:
            frozen = Freezer(self.meta_graph.graph_def, bound_inputs, self.variable, graph_value).freeze(fetches)
        except (BundleError, FreezeError) as e:
            raise SavedModelError(f"{self.directory}, signature {key!r}: {e}") from None
        return frozen.SerializeToString(deterministic=True)

