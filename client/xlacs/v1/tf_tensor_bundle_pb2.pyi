from xlacs.v1 import tf_graph_pb2 as _tf_graph_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BundleHeaderProto(_message.Message):
    __slots__ = ("num_shards", "endianness", "version")
    class Endianness(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        LITTLE: _ClassVar[BundleHeaderProto.Endianness]
        BIG: _ClassVar[BundleHeaderProto.Endianness]
    LITTLE: BundleHeaderProto.Endianness
    BIG: BundleHeaderProto.Endianness
    NUM_SHARDS_FIELD_NUMBER: _ClassVar[int]
    ENDIANNESS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    num_shards: int
    endianness: BundleHeaderProto.Endianness
    version: _tf_graph_pb2.VersionDef
    def __init__(self, num_shards: _Optional[int] = ..., endianness: _Optional[_Union[BundleHeaderProto.Endianness, str]] = ..., version: _Optional[_Union[_tf_graph_pb2.VersionDef, _Mapping]] = ...) -> None: ...

class BundleEntryProto(_message.Message):
    __slots__ = ("dtype", "shape", "shard_id", "offset", "size", "crc32c", "slices")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    SHARD_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CRC32C_FIELD_NUMBER: _ClassVar[int]
    SLICES_FIELD_NUMBER: _ClassVar[int]
    dtype: _tf_graph_pb2.DataType
    shape: _tf_graph_pb2.TensorShapeProto
    shard_id: int
    offset: int
    size: int
    crc32c: int
    slices: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, dtype: _Optional[_Union[_tf_graph_pb2.DataType, str]] = ..., shape: _Optional[_Union[_tf_graph_pb2.TensorShapeProto, _Mapping]] = ..., shard_id: _Optional[int] = ..., offset: _Optional[int] = ..., size: _Optional[int] = ..., crc32c: _Optional[int] = ..., slices: _Optional[_Iterable[bytes]] = ...) -> None: ...
