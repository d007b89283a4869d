from xlacs.v1 import xlacs_pb2 as _xlacs_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BoundWeight(_message.Message):
    __slots__ = ("spec", "blob")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    BLOB_FIELD_NUMBER: _ClassVar[int]
    spec: _xlacs_pb2.TensorSpec
    blob: _xlacs_pb2.Digest
    def __init__(self, spec: _Optional[_Union[_xlacs_pb2.TensorSpec, _Mapping]] = ..., blob: _Optional[_Union[_xlacs_pb2.Digest, _Mapping]] = ...) -> None: ...

class BindingRecord(_message.Message):
    __slots__ = ("executable_key", "inputs", "outputs", "weights")
    EXECUTABLE_KEY_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    executable_key: str
    inputs: _containers.RepeatedCompositeFieldContainer[_xlacs_pb2.TensorSpec]
    outputs: _containers.RepeatedCompositeFieldContainer[_xlacs_pb2.TensorSpec]
    weights: _containers.RepeatedCompositeFieldContainer[BoundWeight]
    def __init__(self, executable_key: _Optional[str] = ..., inputs: _Optional[_Iterable[_Union[_xlacs_pb2.TensorSpec, _Mapping]]] = ..., outputs: _Optional[_Iterable[_Union[_xlacs_pb2.TensorSpec, _Mapping]]] = ..., weights: _Optional[_Iterable[_Union[BoundWeight, _Mapping]]] = ...) -> None: ...

class PreparedRecord(_message.Message):
    __slots__ = ("weights",)
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    weights: _containers.RepeatedCompositeFieldContainer[BoundWeight]
    def __init__(self, weights: _Optional[_Iterable[_Union[BoundWeight, _Mapping]]] = ...) -> None: ...
