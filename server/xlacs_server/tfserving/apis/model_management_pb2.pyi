from xlacs_server.tfserving.apis import status_pb2 as _status_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReloadConfigRequest(_message.Message):
    __slots__ = ("metric_names",)
    METRIC_NAMES_FIELD_NUMBER: _ClassVar[int]
    metric_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, metric_names: _Optional[_Iterable[str]] = ...) -> None: ...

class ReloadConfigResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _status_pb2.StatusProto
    def __init__(self, status: _Optional[_Union[_status_pb2.StatusProto, _Mapping]] = ...) -> None: ...
