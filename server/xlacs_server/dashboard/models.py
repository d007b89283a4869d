"""The pydantic models of the JSON twins: each page renders exactly one of these."""
from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor
from pydantic import BaseModel, Field, create_model

from xlacs_server.passes.registry import PassRecord as PassRecordMessage

_PYTHON_TYPES = {FieldDescriptor.TYPE_STRING: str, FieldDescriptor.TYPE_INT32: int, FieldDescriptor.TYPE_INT64: int,
                 FieldDescriptor.TYPE_DOUBLE: float}


def from_message(message_type) -> type[BaseModel]:
    """A model with the fields of a flat proto message of scalars: the API's message stays their one definition."""
    fields = {f.name: (_PYTHON_TYPES[f.type], ...) for f in message_type.DESCRIPTOR.fields}
    return create_model(message_type.DESCRIPTOR.name, __doc__=f"As {message_type.DESCRIPTOR.full_name}.", **fields)


PassRecord = from_message(PassRecordMessage)


class Device(BaseModel):
    name: str = Field(description="cpu:0, gpu:1, ...")
    platform: str
    kind: str = Field(description="PJRT's device kind")
    memory_used_bytes: int | None = Field(description="in use on the device; for a CPU device, this process's RSS")
    memory_limit_bytes: int | None = Field(description="the device's capacity; for a CPU device, the host's RAM")
    memory_source: str | None = Field(description="pjrt (the device allocator) or host (a CPU device)")
    memory_peak_bytes: int | None = Field(description="the most in use at once, where PJRT reports it")
    budget_bytes: int = Field(description="the device's budget for what the daemon keeps on it (max_device_bytes)")
    budget_weights_bytes: int = Field(description="the loaded executables' weights, counted against the budget")
    budget_resident_bytes: int = Field(description="the resident tensors, counted against the budget")
    budget_state_bytes: int = Field(description="the variable states, counted against the budget")
    compiles_in_flight: int
    executions_in_flight: int
    busy: bool = Field(description="a compile or an execution is running on the device")


class Versions(BaseModel):
    xlacs: str
    jax: str
    jaxlib: str
    python: str
    pjrt: dict[str, str] = Field(description="PJRT platform version by platform")


class Rates(BaseModel):
    """Events per second over the last `window_s`; null until the sampler has history that long."""
    window_s: float
    requests: float | None
    errors: float | None
    compiles: float | None
    executes: float | None


class Totals(BaseModel):
    requests: int
    errors: int
    compiles: int = Field(description="compiles that missed every cache tier")
    executes: int


class Overview(BaseModel):
    devices: list[Device]
    versions: Versions
    started_unix: float
    uptime_s: float
    totals: Totals
    rates: Rates


class Op(BaseModel):
    op: str
    platform: str | None = Field(description="null for the generic rule, else the platform it overrides")
    module: str
    dtypes: list[str] = Field(description="allowed values of the type attr; empty: any dtype")
    devices: list[str]
    constant_inputs: list[str] = Field(description="inputs that must be compile-time constants")
    attrs: list[str]
    graphs: int = Field(description="executables in the memory cache whose graph uses the op")
    nodes: int = Field(description="nodes of the op over those graphs")


class Coverage(BaseModel):
    reference: str = Field(description="the op list compared against")
    device: str | None = Field(description="covered on this platform; null: on any platform")
    total: int
    covered: list[str]
    missing: list[str]
    percent: float


class Ops(BaseModel):
    query: str
    device: str | None
    platforms: list[str]
    registered: int = Field(description="registrations before filtering")
    ops: list[Op]
    coverage: Coverage


class BlobTier(BaseModel):
    tier: str
    hits: int
    misses: int
    hit_rate: float | None = Field(description="hits / lookups since start; null before any lookup")
    entries: int
    bytes: int
    evictions: int
    integrity_errors: int = Field(description="entries refused as misses: truncated, corrupt, or a bad HMAC; for "
                                              "blobs, bytes that did not hash to their digest")


class Tier(BlobTier):
    backend_errors: int = Field(description="failures of the tier's backend: Redis unreachable, an I/O error")
    compile_s_saved: float


class HitRatePoint(BaseModel):
    time_unix: float
    hit_rate: float | None = Field(description="in the interval ending at time_unix; null without lookups")
    lookups: int


class TierHistory(BaseModel):
    tier: str
    points: list[HitRatePoint]


class SharedMemory(BaseModel):
    """Clients' shared-memory regions mapped now (docs/data_plane.md, Shared memory)."""
    sessions: int = Field(description="open sessions (OpenSession calls)")
    regions: int
    bytes: int = Field(description="of the regions, together")


class Cache(BaseModel):
    interval_s: float = Field(description="seconds between samples")
    tiers: list[Tier]
    history: list[TierHistory]
    blob_tiers: list[BlobTier] = Field(description="blobs and graph manifests of compiles by digest, per tier")
    received_bytes: dict[str, int] = Field(description="request bytes received, by RPC")
    upload_saved_bytes: int = Field(description="bytes of the blobs FindMissingBlobs found here already")
    shared_memory: SharedMemory


class TensorSpec(BaseModel):
    name: str
    dtype: str
    shape: list[int]


class ExecutableSummary(BaseModel):
    key: str = Field(description="the cache key: the executable id without its weights digest")
    key_prefix: str = Field(description="the first hex digits of the key's hash")
    graph_name: str
    device: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    stage_ms: dict[str, float]
    compile_ms: float = Field(description="the sum of the stages")
    tier: str = Field(description='the program it runs: "optimized", or "quick" while a tiered compile\'s optimized '
                                  'program is compiled (stage "optimize" once it is)')
    size_bytes: int = Field(description="of the serialized programs: the per-call one and the prepare one")
    prepare_size_bytes: int | None = Field(description="of the prepare program (the weight-only part, run once per "
                                                       "weight set at bind); None when there is none")
    prepare_ms: float | None = Field(description="the prepare program's last run, at a bind")
    hits: int
    created_unix: float
    last_used_unix: float | None


class ResidentTensor(BaseModel):
    handle_prefix: str = Field(description="the first characters of its handle; the whole handle, which lets anyone "
                                           "read the tensor, is never shown")
    executable_id: str = Field(description="the executable whose output it was")
    output: str
    device: str
    dtype: str
    shape: list[int]
    bytes: int
    expires_in_s: float = Field(description="seconds until the daemon frees it, unless FreeTensors frees it before")


class VariableState(BaseModel):
    id_prefix: str = Field(description="the first characters of its id; the whole id, which lets anyone read and "
                                       "train the model, is never shown")
    device: str
    variables: int
    bytes: int
    steps: int = Field(description="Executes run on it")
    created_unix: float
    last_used_unix: float | None


class Executables(BaseModel):
    executables: list[ExecutableSummary]
    resident: list[ResidentTensor] = Field(description="outputs Executes kept on the device (OutputRequest.keep), "
                                                       "the first to expire first")
    states: list[VariableState] = Field(default_factory=list, description="variable states (CreateState), the "
                                                                          "most recently used first")


class ExecutableDetail(ExecutableSummary):
    passes: list[PassRecord]
    op_histogram: dict[str, int]
    stablehlo_url: str
    hlo_url: str
    prepare_stablehlo_url: str | None


class Error(BaseModel):
    time_unix: float
    request_id: str | None
    method: str
    code: str
    message: str


class Errors(BaseModel):
    total: int = Field(description="errors since start; `errors` holds the most recent ones")
    errors: list[Error]


class BatchSize(BaseModel):
    batch_size: int = Field(description="rows of a run of the executable (the dynamic batcher merges requests)")
    executions: int
    mean_compute_s: float


class ModelVersion(BaseModel):
    """One version of a model of the repository (docs/model_repository.md) and what it answered; a model that failed
    before any version (its config) or was unloaded has only its name, state and reason."""
    name: str
    version: str = Field(description="empty for a model without a version to show")
    state: str = Field(description="LOADING, READY, UNAVAILABLE or UNLOADING, as Triton says")
    reason: str = Field(description="why the version is UNAVAILABLE (its load error); empty otherwise")
    platform: str | None = Field(None, description="tensorflow_savedmodel or tensorflow_graphdef")
    max_batch_size: int | None = None
    requests: int = Field(0, description="inference requests answered")
    failures: int = Field(0, description="inference requests failed")
    last_error: str = Field("", description="the message of the latest failed request")
    last_inference_unix: float | None = None
    inference_count: int = Field(0, description="rows answered, as Triton counts inferences")
    execution_count: int = Field(0, description="runs of the executable")
    latency_p50_s: float | None = Field(None, description="over the last answered requests (queue and compute)")
    latency_p99_s: float | None = None
    mean_queue_s: float | None = Field(None, description="waiting for the dynamic batcher or an execute slot")
    mean_compute_s: float | None = Field(None, description="a request's run: its inputs onto the device, the "
                                                          "executable, its outputs back")
    batch_sizes: list[BatchSize] = []


class ServedModels(BaseModel):
    repository: str = Field(description="where the models are: the model repository's directory, or TF Serving's "
                                        "model config file or base path; empty: the daemon serves none")
    ready: bool = Field(description="the initial load ended (every model tried)")
    versions: list[ModelVersion]


class Health(BaseModel):
    status: str


class Problem(BaseModel):
    detail: str
