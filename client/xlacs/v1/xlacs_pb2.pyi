from xlacs.v1 import tf_graph_pb2 as _tf_graph_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Digest(_message.Message):
    __slots__ = ("hash", "size_bytes")
    HASH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    hash: str
    size_bytes: int
    def __init__(self, hash: _Optional[str] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class GraphManifest(_message.Message):
    __slots__ = ("skeleton", "cuts")
    SKELETON_FIELD_NUMBER: _ClassVar[int]
    CUTS_FIELD_NUMBER: _ClassVar[int]
    skeleton: Digest
    cuts: _containers.RepeatedCompositeFieldContainer[Cut]
    def __init__(self, skeleton: _Optional[_Union[Digest, _Mapping]] = ..., cuts: _Optional[_Iterable[_Union[Cut, _Mapping]]] = ...) -> None: ...

class Cut(_message.Message):
    __slots__ = ("offset", "blob")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    BLOB_FIELD_NUMBER: _ClassVar[int]
    offset: int
    blob: Digest
    def __init__(self, offset: _Optional[int] = ..., blob: _Optional[_Union[Digest, _Mapping]] = ...) -> None: ...

class FindMissingBlobsRequest(_message.Message):
    __slots__ = ("digests",)
    DIGESTS_FIELD_NUMBER: _ClassVar[int]
    digests: _containers.RepeatedCompositeFieldContainer[Digest]
    def __init__(self, digests: _Optional[_Iterable[_Union[Digest, _Mapping]]] = ...) -> None: ...

class FindMissingBlobsResponse(_message.Message):
    __slots__ = ("missing",)
    MISSING_FIELD_NUMBER: _ClassVar[int]
    missing: _containers.RepeatedCompositeFieldContainer[Digest]
    def __init__(self, missing: _Optional[_Iterable[_Union[Digest, _Mapping]]] = ...) -> None: ...

class BlobChunk(_message.Message):
    __slots__ = ("digest", "offset", "data")
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    digest: Digest
    offset: int
    data: bytes
    def __init__(self, digest: _Optional[_Union[Digest, _Mapping]] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class UploadBlobsResponse(_message.Message):
    __slots__ = ("blobs", "bytes")
    BLOBS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    blobs: int
    bytes: int
    def __init__(self, blobs: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class MissingBlobs(_message.Message):
    __slots__ = ("digests",)
    DIGESTS_FIELD_NUMBER: _ClassVar[int]
    digests: _containers.RepeatedCompositeFieldContainer[Digest]
    def __init__(self, digests: _Optional[_Iterable[_Union[Digest, _Mapping]]] = ...) -> None: ...

class Tensor(_message.Message):
    __slots__ = ("name", "dtype", "shape", "content", "offset", "shared_memory", "handle")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: _tf_graph_pb2.DataType
    shape: _containers.RepeatedScalarFieldContainer[int]
    content: bytes
    offset: int
    shared_memory: SharedMemoryRef
    handle: str
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[_Union[_tf_graph_pb2.DataType, str]] = ..., shape: _Optional[_Iterable[int]] = ..., content: _Optional[bytes] = ..., offset: _Optional[int] = ..., shared_memory: _Optional[_Union[SharedMemoryRef, _Mapping]] = ..., handle: _Optional[str] = ...) -> None: ...

class SharedMemoryRef(_message.Message):
    __slots__ = ("region", "offset", "byte_size")
    REGION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    BYTE_SIZE_FIELD_NUMBER: _ClassVar[int]
    region: str
    offset: int
    byte_size: int
    def __init__(self, region: _Optional[str] = ..., offset: _Optional[int] = ..., byte_size: _Optional[int] = ...) -> None: ...

class TensorSpec(_message.Message):
    __slots__ = ("name", "dtype", "shape")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: _tf_graph_pb2.DataType
    shape: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[_Union[_tf_graph_pb2.DataType, str]] = ..., shape: _Optional[_Iterable[int]] = ...) -> None: ...

class Signature(_message.Message):
    __slots__ = ("inputs", "outputs")
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.RepeatedCompositeFieldContainer[TensorSpec]
    outputs: _containers.RepeatedCompositeFieldContainer[TensorSpec]
    def __init__(self, inputs: _Optional[_Iterable[_Union[TensorSpec, _Mapping]]] = ..., outputs: _Optional[_Iterable[_Union[TensorSpec, _Mapping]]] = ...) -> None: ...

class CompileRequest(_message.Message):
    __slots__ = ("graph_def", "feeds", "fetches", "device", "graph_name", "dump_graphs", "graph_digest", "graph_manifest", "bucket_sizes", "wait_optimized")
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    FEEDS_FIELD_NUMBER: _ClassVar[int]
    FETCHES_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_NAME_FIELD_NUMBER: _ClassVar[int]
    DUMP_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DIGEST_FIELD_NUMBER: _ClassVar[int]
    GRAPH_MANIFEST_FIELD_NUMBER: _ClassVar[int]
    BUCKET_SIZES_FIELD_NUMBER: _ClassVar[int]
    WAIT_OPTIMIZED_FIELD_NUMBER: _ClassVar[int]
    graph_def: bytes
    feeds: _containers.RepeatedCompositeFieldContainer[TensorSpec]
    fetches: _containers.RepeatedScalarFieldContainer[str]
    device: str
    graph_name: str
    dump_graphs: bool
    graph_digest: Digest
    graph_manifest: GraphManifest
    bucket_sizes: _containers.RepeatedScalarFieldContainer[int]
    wait_optimized: bool
    def __init__(self, graph_def: _Optional[bytes] = ..., feeds: _Optional[_Iterable[_Union[TensorSpec, _Mapping]]] = ..., fetches: _Optional[_Iterable[str]] = ..., device: _Optional[str] = ..., graph_name: _Optional[str] = ..., dump_graphs: _Optional[bool] = ..., graph_digest: _Optional[_Union[Digest, _Mapping]] = ..., graph_manifest: _Optional[_Union[GraphManifest, _Mapping]] = ..., bucket_sizes: _Optional[_Iterable[int]] = ..., wait_optimized: _Optional[bool] = ...) -> None: ...

class GraphDump(_message.Message):
    __slots__ = ("name", "pbtxt")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PBTXT_FIELD_NUMBER: _ClassVar[int]
    name: str
    pbtxt: str
    def __init__(self, name: _Optional[str] = ..., pbtxt: _Optional[str] = ...) -> None: ...

class PassRecord(_message.Message):
    __slots__ = ("name", "grouping", "phase", "ms", "nodes_before", "nodes_after")
    NAME_FIELD_NUMBER: _ClassVar[int]
    GROUPING_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    MS_FIELD_NUMBER: _ClassVar[int]
    NODES_BEFORE_FIELD_NUMBER: _ClassVar[int]
    NODES_AFTER_FIELD_NUMBER: _ClassVar[int]
    name: str
    grouping: str
    phase: int
    ms: float
    nodes_before: int
    nodes_after: int
    def __init__(self, name: _Optional[str] = ..., grouping: _Optional[str] = ..., phase: _Optional[int] = ..., ms: _Optional[float] = ..., nodes_before: _Optional[int] = ..., nodes_after: _Optional[int] = ...) -> None: ...

class CompileResponse(_message.Message):
    __slots__ = ("executable_id", "signature", "stage_ms", "cache", "passes", "graph_dumps", "tier")
    class StageMsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    EXECUTABLE_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    STAGE_MS_FIELD_NUMBER: _ClassVar[int]
    CACHE_FIELD_NUMBER: _ClassVar[int]
    PASSES_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DUMPS_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    executable_id: str
    signature: Signature
    stage_ms: _containers.ScalarMap[str, float]
    cache: str
    passes: _containers.RepeatedCompositeFieldContainer[PassRecord]
    graph_dumps: _containers.RepeatedCompositeFieldContainer[GraphDump]
    tier: str
    def __init__(self, executable_id: _Optional[str] = ..., signature: _Optional[_Union[Signature, _Mapping]] = ..., stage_ms: _Optional[_Mapping[str, float]] = ..., cache: _Optional[str] = ..., passes: _Optional[_Iterable[_Union[PassRecord, _Mapping]]] = ..., graph_dumps: _Optional[_Iterable[_Union[GraphDump, _Mapping]]] = ..., tier: _Optional[str] = ...) -> None: ...

class ExecuteRequest(_message.Message):
    __slots__ = ("executable_id", "inputs", "outputs", "session_id", "state_id")
    EXECUTABLE_ID_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_ID_FIELD_NUMBER: _ClassVar[int]
    executable_id: str
    inputs: _containers.RepeatedCompositeFieldContainer[Tensor]
    outputs: _containers.RepeatedCompositeFieldContainer[OutputRequest]
    session_id: str
    state_id: str
    def __init__(self, executable_id: _Optional[str] = ..., inputs: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ..., outputs: _Optional[_Iterable[_Union[OutputRequest, _Mapping]]] = ..., session_id: _Optional[str] = ..., state_id: _Optional[str] = ...) -> None: ...

class OutputRequest(_message.Message):
    __slots__ = ("name", "shared_memory", "keep", "ttl_s")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    KEEP_FIELD_NUMBER: _ClassVar[int]
    TTL_S_FIELD_NUMBER: _ClassVar[int]
    name: str
    shared_memory: SharedMemoryRef
    keep: bool
    ttl_s: float
    def __init__(self, name: _Optional[str] = ..., shared_memory: _Optional[_Union[SharedMemoryRef, _Mapping]] = ..., keep: _Optional[bool] = ..., ttl_s: _Optional[float] = ...) -> None: ...

class ExecuteResponse(_message.Message):
    __slots__ = ("outputs", "execute_ms")
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    EXECUTE_MS_FIELD_NUMBER: _ClassVar[int]
    outputs: _containers.RepeatedCompositeFieldContainer[Tensor]
    execute_ms: float
    def __init__(self, outputs: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ..., execute_ms: _Optional[float] = ...) -> None: ...

class OpenSessionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SessionEvent(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class RegisterSharedMemoryRequest(_message.Message):
    __slots__ = ("session_id", "name", "key", "offset", "byte_size")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    BYTE_SIZE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    name: str
    key: str
    offset: int
    byte_size: int
    def __init__(self, session_id: _Optional[str] = ..., name: _Optional[str] = ..., key: _Optional[str] = ..., offset: _Optional[int] = ..., byte_size: _Optional[int] = ...) -> None: ...

class RegisterSharedMemoryResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UnregisterSharedMemoryRequest(_message.Message):
    __slots__ = ("session_id", "name")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    name: str
    def __init__(self, session_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class UnregisterSharedMemoryResponse(_message.Message):
    __slots__ = ("regions",)
    REGIONS_FIELD_NUMBER: _ClassVar[int]
    regions: int
    def __init__(self, regions: _Optional[int] = ...) -> None: ...

class FetchTensorsRequest(_message.Message):
    __slots__ = ("handles",)
    HANDLES_FIELD_NUMBER: _ClassVar[int]
    handles: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, handles: _Optional[_Iterable[str]] = ...) -> None: ...

class FetchTensorsResponse(_message.Message):
    __slots__ = ("tensors",)
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    tensors: _containers.RepeatedCompositeFieldContainer[Tensor]
    def __init__(self, tensors: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ...) -> None: ...

class FreeTensorsRequest(_message.Message):
    __slots__ = ("handles",)
    HANDLES_FIELD_NUMBER: _ClassVar[int]
    handles: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, handles: _Optional[_Iterable[str]] = ...) -> None: ...

class FreeTensorsResponse(_message.Message):
    __slots__ = ("tensors", "bytes")
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    tensors: int
    bytes: int
    def __init__(self, tensors: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class DownloadExecutableRequest(_message.Message):
    __slots__ = ("executable_id", "have")
    EXECUTABLE_ID_FIELD_NUMBER: _ClassVar[int]
    HAVE_FIELD_NUMBER: _ClassVar[int]
    executable_id: str
    have: _containers.RepeatedCompositeFieldContainer[Digest]
    def __init__(self, executable_id: _Optional[str] = ..., have: _Optional[_Iterable[_Union[Digest, _Mapping]]] = ...) -> None: ...

class ExecutableDownload(_message.Message):
    __slots__ = ("package", "chunk")
    PACKAGE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    package: ExecutablePackage
    chunk: BlobChunk
    def __init__(self, package: _Optional[_Union[ExecutablePackage, _Mapping]] = ..., chunk: _Optional[_Union[BlobChunk, _Mapping]] = ...) -> None: ...

class ExecutablePackage(_message.Message):
    __slots__ = ("executable_id", "signature", "platform", "platform_version", "jaxlib_version", "program", "weights", "weight_blobs")
    EXECUTABLE_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_VERSION_FIELD_NUMBER: _ClassVar[int]
    JAXLIB_VERSION_FIELD_NUMBER: _ClassVar[int]
    PROGRAM_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_BLOBS_FIELD_NUMBER: _ClassVar[int]
    executable_id: str
    signature: Signature
    platform: str
    platform_version: str
    jaxlib_version: str
    program: Digest
    weights: _containers.RepeatedCompositeFieldContainer[TensorSpec]
    weight_blobs: _containers.RepeatedCompositeFieldContainer[Digest]
    def __init__(self, executable_id: _Optional[str] = ..., signature: _Optional[_Union[Signature, _Mapping]] = ..., platform: _Optional[str] = ..., platform_version: _Optional[str] = ..., jaxlib_version: _Optional[str] = ..., program: _Optional[_Union[Digest, _Mapping]] = ..., weights: _Optional[_Iterable[_Union[TensorSpec, _Mapping]]] = ..., weight_blobs: _Optional[_Iterable[_Union[Digest, _Mapping]]] = ...) -> None: ...

class ListOpsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class OpLowering(_message.Message):
    __slots__ = ("op", "dtypes", "devices", "constant_inputs", "attrs", "platform_overrides", "module")
    OP_FIELD_NUMBER: _ClassVar[int]
    DTYPES_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    CONSTANT_INPUTS_FIELD_NUMBER: _ClassVar[int]
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_OVERRIDES_FIELD_NUMBER: _ClassVar[int]
    MODULE_FIELD_NUMBER: _ClassVar[int]
    op: str
    dtypes: _containers.RepeatedScalarFieldContainer[str]
    devices: _containers.RepeatedScalarFieldContainer[str]
    constant_inputs: _containers.RepeatedScalarFieldContainer[str]
    attrs: _containers.RepeatedScalarFieldContainer[str]
    platform_overrides: _containers.RepeatedScalarFieldContainer[str]
    module: str
    def __init__(self, op: _Optional[str] = ..., dtypes: _Optional[_Iterable[str]] = ..., devices: _Optional[_Iterable[str]] = ..., constant_inputs: _Optional[_Iterable[str]] = ..., attrs: _Optional[_Iterable[str]] = ..., platform_overrides: _Optional[_Iterable[str]] = ..., module: _Optional[str] = ...) -> None: ...

class ListOpsResponse(_message.Message):
    __slots__ = ("ops",)
    OPS_FIELD_NUMBER: _ClassVar[int]
    ops: _containers.RepeatedCompositeFieldContainer[OpLowering]
    def __init__(self, ops: _Optional[_Iterable[_Union[OpLowering, _Mapping]]] = ...) -> None: ...

class CheckGraphRequest(_message.Message):
    __slots__ = ("graph_def", "device")
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    graph_def: bytes
    device: str
    def __init__(self, graph_def: _Optional[bytes] = ..., device: _Optional[str] = ...) -> None: ...

class UnsupportedOp(_message.Message):
    __slots__ = ("op", "nodes")
    OP_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    op: str
    nodes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, op: _Optional[str] = ..., nodes: _Optional[_Iterable[str]] = ...) -> None: ...

class CheckGraphResponse(_message.Message):
    __slots__ = ("op_histogram", "unsupported", "node_count")
    class OpHistogramEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    OP_HISTOGRAM_FIELD_NUMBER: _ClassVar[int]
    UNSUPPORTED_FIELD_NUMBER: _ClassVar[int]
    NODE_COUNT_FIELD_NUMBER: _ClassVar[int]
    op_histogram: _containers.ScalarMap[str, int]
    unsupported: _containers.RepeatedCompositeFieldContainer[UnsupportedOp]
    node_count: int
    def __init__(self, op_histogram: _Optional[_Mapping[str, int]] = ..., unsupported: _Optional[_Iterable[_Union[UnsupportedOp, _Mapping]]] = ..., node_count: _Optional[int] = ...) -> None: ...

class GetStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TierStats(_message.Message):
    __slots__ = ("tier", "hits", "misses", "evictions", "errors", "entries", "bytes", "compile_ms_saved", "rejected", "skipped")
    TIER_FIELD_NUMBER: _ClassVar[int]
    HITS_FIELD_NUMBER: _ClassVar[int]
    MISSES_FIELD_NUMBER: _ClassVar[int]
    EVICTIONS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    COMPILE_MS_SAVED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    tier: str
    hits: int
    misses: int
    evictions: int
    errors: int
    entries: int
    bytes: int
    compile_ms_saved: float
    rejected: int
    skipped: int
    def __init__(self, tier: _Optional[str] = ..., hits: _Optional[int] = ..., misses: _Optional[int] = ..., evictions: _Optional[int] = ..., errors: _Optional[int] = ..., entries: _Optional[int] = ..., bytes: _Optional[int] = ..., compile_ms_saved: _Optional[float] = ..., rejected: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class Device(_message.Message):
    __slots__ = ("name", "platform", "kind")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    name: str
    platform: str
    kind: str
    def __init__(self, name: _Optional[str] = ..., platform: _Optional[str] = ..., kind: _Optional[str] = ...) -> None: ...

class Stats(_message.Message):
    __slots__ = ("tiers", "compiles", "executes", "errors", "uptime_s", "devices", "version", "blob_tiers", "received_bytes", "upload_saved_bytes", "bucket_compiles", "padding_elements", "padded_elements", "resident_tensors", "resident_bytes", "shared_memory_regions", "shared_memory_bytes", "states", "state_bytes")
    class ReceivedBytesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    TIERS_FIELD_NUMBER: _ClassVar[int]
    COMPILES_FIELD_NUMBER: _ClassVar[int]
    EXECUTES_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BLOB_TIERS_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_BYTES_FIELD_NUMBER: _ClassVar[int]
    UPLOAD_SAVED_BYTES_FIELD_NUMBER: _ClassVar[int]
    BUCKET_COMPILES_FIELD_NUMBER: _ClassVar[int]
    PADDING_ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    PADDED_ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    RESIDENT_TENSORS_FIELD_NUMBER: _ClassVar[int]
    RESIDENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_REGIONS_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    STATE_BYTES_FIELD_NUMBER: _ClassVar[int]
    tiers: _containers.RepeatedCompositeFieldContainer[TierStats]
    compiles: int
    executes: int
    errors: int
    uptime_s: float
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    version: str
    blob_tiers: _containers.RepeatedCompositeFieldContainer[TierStats]
    received_bytes: _containers.ScalarMap[str, int]
    upload_saved_bytes: int
    bucket_compiles: int
    padding_elements: int
    padded_elements: int
    resident_tensors: int
    resident_bytes: int
    shared_memory_regions: int
    shared_memory_bytes: int
    states: int
    state_bytes: int
    def __init__(self, tiers: _Optional[_Iterable[_Union[TierStats, _Mapping]]] = ..., compiles: _Optional[int] = ..., executes: _Optional[int] = ..., errors: _Optional[int] = ..., uptime_s: _Optional[float] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., version: _Optional[str] = ..., blob_tiers: _Optional[_Iterable[_Union[TierStats, _Mapping]]] = ..., received_bytes: _Optional[_Mapping[str, int]] = ..., upload_saved_bytes: _Optional[int] = ..., bucket_compiles: _Optional[int] = ..., padding_elements: _Optional[int] = ..., padded_elements: _Optional[int] = ..., resident_tensors: _Optional[int] = ..., resident_bytes: _Optional[int] = ..., shared_memory_regions: _Optional[int] = ..., shared_memory_bytes: _Optional[int] = ..., states: _Optional[int] = ..., state_bytes: _Optional[int] = ...) -> None: ...

class GetExecutableRequest(_message.Message):
    __slots__ = ("executable_id",)
    EXECUTABLE_ID_FIELD_NUMBER: _ClassVar[int]
    executable_id: str
    def __init__(self, executable_id: _Optional[str] = ...) -> None: ...

class ExecutableInfo(_message.Message):
    __slots__ = ("executable_id", "graph_name", "device", "signature", "stage_ms", "passes", "size_bytes", "hits", "created_unix", "last_used_unix", "tier")
    class StageMsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    EXECUTABLE_ID_FIELD_NUMBER: _ClassVar[int]
    GRAPH_NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    STAGE_MS_FIELD_NUMBER: _ClassVar[int]
    PASSES_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    HITS_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_UNIX_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    executable_id: str
    graph_name: str
    device: str
    signature: Signature
    stage_ms: _containers.ScalarMap[str, float]
    passes: _containers.RepeatedCompositeFieldContainer[PassRecord]
    size_bytes: int
    hits: int
    created_unix: float
    last_used_unix: float
    tier: str
    def __init__(self, executable_id: _Optional[str] = ..., graph_name: _Optional[str] = ..., device: _Optional[str] = ..., signature: _Optional[_Union[Signature, _Mapping]] = ..., stage_ms: _Optional[_Mapping[str, float]] = ..., passes: _Optional[_Iterable[_Union[PassRecord, _Mapping]]] = ..., size_bytes: _Optional[int] = ..., hits: _Optional[int] = ..., created_unix: _Optional[float] = ..., last_used_unix: _Optional[float] = ..., tier: _Optional[str] = ...) -> None: ...

class CreateStateRequest(_message.Message):
    __slots__ = ("variables", "device")
    VARIABLES_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    variables: _containers.RepeatedCompositeFieldContainer[Tensor]
    device: str
    def __init__(self, variables: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ..., device: _Optional[str] = ...) -> None: ...

class CreateStateResponse(_message.Message):
    __slots__ = ("state_id", "variables", "bytes")
    STATE_ID_FIELD_NUMBER: _ClassVar[int]
    VARIABLES_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    state_id: str
    variables: _containers.RepeatedCompositeFieldContainer[TensorSpec]
    bytes: int
    def __init__(self, state_id: _Optional[str] = ..., variables: _Optional[_Iterable[_Union[TensorSpec, _Mapping]]] = ..., bytes: _Optional[int] = ...) -> None: ...

class ReadVariablesRequest(_message.Message):
    __slots__ = ("state_id", "names")
    STATE_ID_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    state_id: str
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, state_id: _Optional[str] = ..., names: _Optional[_Iterable[str]] = ...) -> None: ...

class ReadVariablesResponse(_message.Message):
    __slots__ = ("variables",)
    VARIABLES_FIELD_NUMBER: _ClassVar[int]
    variables: _containers.RepeatedCompositeFieldContainer[Tensor]
    def __init__(self, variables: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ...) -> None: ...

class DeleteStateRequest(_message.Message):
    __slots__ = ("state_id",)
    STATE_ID_FIELD_NUMBER: _ClassVar[int]
    state_id: str
    def __init__(self, state_id: _Optional[str] = ...) -> None: ...

class DeleteStateResponse(_message.Message):
    __slots__ = ("freed_bytes",)
    FREED_BYTES_FIELD_NUMBER: _ClassVar[int]
    freed_bytes: int
    def __init__(self, freed_bytes: _Optional[int] = ...) -> None: ...
