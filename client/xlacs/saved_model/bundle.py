"""Reads a TensorBundle, TensorFlow's checkpoint format (tensorflow/core/util/tensor_bundle/): a SavedModel's
variables/variables.index and variables/variables.data-NNNNN-of-MMMMM, without TensorFlow.

The index is an SSTable (xlacs.saved_model.table) whose empty key holds a BundleHeaderProto (the number of data
shards, their byte order) and whose other keys are checkpoint keys, each holding a BundleEntryProto: the
tensor's dtype and shape, its shard, and where its bytes lie there. A numeric tensor's bytes are its values in
the header's byte order. A string tensor's are the varint64 length of each element, a 4-byte checksum of
those lengths, then the elements' bytes."""
from __future__ import annotations

import mmap
import pathlib

import numpy as np

from xlacs import dtypes
from xlacs.saved_model.table import TableError, read_varint, read_table
from xlacs.v1 import tf_graph_pb2, tf_tensor_bundle_pb2

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


class BundleError(ValueError):
    """A TensorBundle that is missing, malformed, or holds what xlacs does not read (partitioned variables)."""


class Bundle:
    """A TensorBundle's entries by checkpoint key; `tensor(key)` reads one tensor's values from its shard."""

    def __init__(self, prefix: str | pathlib.Path):
        """prefix: the bundle's path without its suffixes, e.g. a SavedModel's `variables/variables`."""
        self.prefix = pathlib.Path(prefix)
        index = self.prefix.with_name(self.prefix.name + ".index")
        try:
            data = index.read_bytes()
        except OSError as e:
            raise BundleError(f"cannot read the TensorBundle index {index}: {e.strerror}") from None
        self.entries: dict[str, tf_tensor_bundle_pb2.BundleEntryProto] = {}
        header = None
        try:
            for key, value in read_table(data):
                if key:
                    self.entries[key.decode()] = tf_tensor_bundle_pb2.BundleEntryProto.FromString(value)
                else:
                    header = tf_tensor_bundle_pb2.BundleHeaderProto.FromString(value)
        except (TableError, UnicodeDecodeError, ValueError) as e:
            raise BundleError(f"{index} is not a TensorBundle index: {e}") from None
        if header is None:
            raise BundleError(f"{index} has no BundleHeaderProto (the empty key)")
        self.num_shards = max(header.num_shards, 1)
        self.byte_order = "<" if header.endianness == tf_tensor_bundle_pb2.BundleHeaderProto.LITTLE else ">"

    def shard_path(self, shard_id: int) -> pathlib.Path:
        return self.prefix.with_name(f"{self.prefix.name}.data-{shard_id:05d}-of-{self.num_shards:05d}")

    def _bytes(self, key: str) -> tuple[tf_tensor_bundle_pb2.BundleEntryProto, bytes]:
        entry = self.entries.get(key)
        if entry is None:
            raise BundleError(f"the TensorBundle {self.prefix} has no tensor {key!r}")
        if entry.slices:
            raise BundleError(f"tensor {key!r} is a partitioned variable (saved in slices); xlacs reads whole "
                              "tensors only")
        path = self.shard_path(entry.shard_id)
        try:
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if entry.offset + entry.size > len(data):
                    raise BundleError(f"tensor {key!r} lies at bytes {entry.offset}..{entry.offset + entry.size} "
                                      f"of {path}, which has {len(data)}")
                return entry, data[entry.offset:entry.offset + entry.size]
        except (OSError, ValueError) as e:  # mmap refuses an empty file with ValueError
            raise BundleError(f"cannot read tensor {key!r} from {path}: {e}") from None

    def tensor(self, key: str) -> np.ndarray:
        """The numeric tensor under `key`, as a little-endian array."""
        entry, data = self._bytes(key)
        try:
            dtype = dtypes.to_numpy(entry.dtype)
        except dtypes.UnsupportedDType as e:
            raise BundleError(f"tensor {key!r} has {e}") from None
        shape = tuple(d.size for d in entry.shape.dim)
        if len(data) != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            raise BundleError(f"tensor {key!r} has {len(data)} bytes, not those of {dtype}{list(shape)}")
        return np.frombuffer(data, dtype=dtype.newbyteorder(self.byte_order)).astype(dtype).reshape(shape)

    def string(self, key: str) -> bytes:
        """The scalar string tensor under `key` (the checkpoint's object graph)."""
        entry, data = self._bytes(key)
        if entry.dtype != tf_graph_pb2.DT_STRING or entry.shape.dim:
            raise BundleError(f"tensor {key!r} is not a scalar string")
        try:
            length, pos = read_varint(memoryview(data), 0)
        except TableError:
            raise BundleError(f"tensor {key!r} has no string length") from None
        if pos + 4 + length != len(data):
            raise BundleError(f"tensor {key!r}: a string of {length} bytes in {len(data)}")
        return data[pos + 4:]
