from xlacs.v1 import tf_graph_pb2 as _tf_graph_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SavedModel(_message.Message):
    __slots__ = ("saved_model_schema_version", "meta_graphs")
    SAVED_MODEL_SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    META_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    saved_model_schema_version: int
    meta_graphs: _containers.RepeatedCompositeFieldContainer[MetaGraphDef]
    def __init__(self, saved_model_schema_version: _Optional[int] = ..., meta_graphs: _Optional[_Iterable[_Union[MetaGraphDef, _Mapping]]] = ...) -> None: ...

class MetaGraphDef(_message.Message):
    __slots__ = ("meta_info_def", "graph_def", "signature_def", "object_graph_def")
    class MetaInfoDef(_message.Message):
        __slots__ = ("meta_graph_version", "tags", "tensorflow_version")
        META_GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
        TAGS_FIELD_NUMBER: _ClassVar[int]
        TENSORFLOW_VERSION_FIELD_NUMBER: _ClassVar[int]
        meta_graph_version: str
        tags: _containers.RepeatedScalarFieldContainer[str]
        tensorflow_version: str
        def __init__(self, meta_graph_version: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., tensorflow_version: _Optional[str] = ...) -> None: ...
    class SignatureDefEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: SignatureDef
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[SignatureDef, _Mapping]] = ...) -> None: ...
    META_INFO_DEF_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_DEF_FIELD_NUMBER: _ClassVar[int]
    OBJECT_GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    meta_info_def: MetaGraphDef.MetaInfoDef
    graph_def: _tf_graph_pb2.GraphDef
    signature_def: _containers.MessageMap[str, SignatureDef]
    object_graph_def: SavedObjectGraph
    def __init__(self, meta_info_def: _Optional[_Union[MetaGraphDef.MetaInfoDef, _Mapping]] = ..., graph_def: _Optional[_Union[_tf_graph_pb2.GraphDef, _Mapping]] = ..., signature_def: _Optional[_Mapping[str, SignatureDef]] = ..., object_graph_def: _Optional[_Union[SavedObjectGraph, _Mapping]] = ...) -> None: ...

class TensorInfo(_message.Message):
    __slots__ = ("name", "dtype", "tensor_shape")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    TENSOR_SHAPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: _tf_graph_pb2.DataType
    tensor_shape: _tf_graph_pb2.TensorShapeProto
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[_Union[_tf_graph_pb2.DataType, str]] = ..., tensor_shape: _Optional[_Union[_tf_graph_pb2.TensorShapeProto, _Mapping]] = ...) -> None: ...

class SignatureDef(_message.Message):
    __slots__ = ("inputs", "outputs", "method_name")
    class InputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: TensorInfo
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[TensorInfo, _Mapping]] = ...) -> None: ...
    class OutputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: TensorInfo
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[TensorInfo, _Mapping]] = ...) -> None: ...
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    METHOD_NAME_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.MessageMap[str, TensorInfo]
    outputs: _containers.MessageMap[str, TensorInfo]
    method_name: str
    def __init__(self, inputs: _Optional[_Mapping[str, TensorInfo]] = ..., outputs: _Optional[_Mapping[str, TensorInfo]] = ..., method_name: _Optional[str] = ...) -> None: ...

class SavedObjectGraph(_message.Message):
    __slots__ = ("nodes", "concrete_functions")
    class ConcreteFunctionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: SavedConcreteFunction
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[SavedConcreteFunction, _Mapping]] = ...) -> None: ...
    NODES_FIELD_NUMBER: _ClassVar[int]
    CONCRETE_FUNCTIONS_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[SavedObject]
    concrete_functions: _containers.MessageMap[str, SavedConcreteFunction]
    def __init__(self, nodes: _Optional[_Iterable[_Union[SavedObject, _Mapping]]] = ..., concrete_functions: _Optional[_Mapping[str, SavedConcreteFunction]] = ...) -> None: ...

class SavedObject(_message.Message):
    __slots__ = ("children", "variable")
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    VARIABLE_FIELD_NUMBER: _ClassVar[int]
    children: _containers.RepeatedCompositeFieldContainer[TrackableObjectGraph.TrackableObject.ObjectReference]
    variable: SavedVariable
    def __init__(self, children: _Optional[_Iterable[_Union[TrackableObjectGraph.TrackableObject.ObjectReference, _Mapping]]] = ..., variable: _Optional[_Union[SavedVariable, _Mapping]] = ...) -> None: ...

class SavedConcreteFunction(_message.Message):
    __slots__ = ("bound_inputs",)
    BOUND_INPUTS_FIELD_NUMBER: _ClassVar[int]
    bound_inputs: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, bound_inputs: _Optional[_Iterable[int]] = ...) -> None: ...

class SavedVariable(_message.Message):
    __slots__ = ("dtype", "shape", "trainable", "name")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    TRAINABLE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    dtype: _tf_graph_pb2.DataType
    shape: _tf_graph_pb2.TensorShapeProto
    trainable: bool
    name: str
    def __init__(self, dtype: _Optional[_Union[_tf_graph_pb2.DataType, str]] = ..., shape: _Optional[_Union[_tf_graph_pb2.TensorShapeProto, _Mapping]] = ..., trainable: _Optional[bool] = ..., name: _Optional[str] = ...) -> None: ...

class TrackableObjectGraph(_message.Message):
    __slots__ = ("nodes",)
    class TrackableObject(_message.Message):
        __slots__ = ("children", "attributes")
        class ObjectReference(_message.Message):
            __slots__ = ("node_id", "local_name")
            NODE_ID_FIELD_NUMBER: _ClassVar[int]
            LOCAL_NAME_FIELD_NUMBER: _ClassVar[int]
            node_id: int
            local_name: str
            def __init__(self, node_id: _Optional[int] = ..., local_name: _Optional[str] = ...) -> None: ...
        class SerializedTensor(_message.Message):
            __slots__ = ("name", "full_name", "checkpoint_key")
            NAME_FIELD_NUMBER: _ClassVar[int]
            FULL_NAME_FIELD_NUMBER: _ClassVar[int]
            CHECKPOINT_KEY_FIELD_NUMBER: _ClassVar[int]
            name: str
            full_name: str
            checkpoint_key: str
            def __init__(self, name: _Optional[str] = ..., full_name: _Optional[str] = ..., checkpoint_key: _Optional[str] = ...) -> None: ...
        CHILDREN_FIELD_NUMBER: _ClassVar[int]
        ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
        children: _containers.RepeatedCompositeFieldContainer[TrackableObjectGraph.TrackableObject.ObjectReference]
        attributes: _containers.RepeatedCompositeFieldContainer[TrackableObjectGraph.TrackableObject.SerializedTensor]
        def __init__(self, children: _Optional[_Iterable[_Union[TrackableObjectGraph.TrackableObject.ObjectReference, _Mapping]]] = ..., attributes: _Optional[_Iterable[_Union[TrackableObjectGraph.TrackableObject.SerializedTensor, _Mapping]]] = ...) -> None: ...
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[TrackableObjectGraph.TrackableObject]
    def __init__(self, nodes: _Optional[_Iterable[_Union[TrackableObjectGraph.TrackableObject, _Mapping]]] = ...) -> None: ...
