"""Settings, read once at start from flags and XLACS_* environment variables into a frozen object."""
from __future__ import annotations

import dataclasses
import os

GIB = 1 << 30
# A request carries a GraphDef or inputs plus names and framing (protobuf's on gRPC, JSON's on REST): each transport
# admits this much more, so that the byte limits answer with their own names.
REQUEST_HEADROOM_BYTES = 16 << 20
_BOOLEANS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False, "": False}


@dataclasses.dataclass(frozen=True)
class Settings:
    host: str = "0.0.0.0"
    port: int = 50051
    http_port: int = 8080
    devices: tuple[str, ...] = ()  # empty: every device PJRT offers
    # Start only with a GPU (the GPU image sets it): without one, `xlacs serve` stops saying why, instead of serving
    # on the CPU alone.
    require_gpu: bool = False
    shutdown_grace_s: float = 30.0  # on SIGTERM, calls in flight get this long to finish, then are cancelled
    # gRPC threads; an RPC beyond them fails fast with RESOURCE_EXHAUSTED. The threads the gated calls below leave,
    # but one for health checks, are those of the infers waiting in dynamic batchers (gates.py, Gates): 49 by
    # default (threads start only when calls need them).
    workers: int = 64
    l1_max_entries: int = 256
    l1_max_bytes: int = 4 * GIB
    # Limits of one request (docs/security.md), sized for a 2-core box. Frozen ResNet50 is ~100 MB; graphs of
    # over 1 GB compile; protobuf stops at 2 GiB.
    max_graph_bytes: int = 1536 << 20
    max_graph_nodes: int = 200_000  # the graph's nodes plus those of its function library
    max_function_depth: int = 32  # library functions calling functions (If, While, calls) this deep
    max_tensor_elements: int = 1 << 29  # any one tensor: fed, constant or computed (2 GiB of float32)
    max_input_bytes: int = 256 << 20  # the inputs of one Execute, together
    max_fill_bytes: int = 256 << 20  # constant values a GraphDef does not carry but TF fills in, per request
    max_attr_list_length: int = 1 << 16  # items of any one list attr
    # Compile (and CheckGraph) and Execute calls run in these many slots; this many more wait, and the
    # next one fails fast. The gated calls must leave at least one of the `workers` to health checks.
    max_concurrent_compiles: int = 2
    compile_queue: int = 4
    max_concurrent_executes: int = 4
    execute_queue: int = 4
    compile_deadline_s: float = 600.0  # a compile stops at the earlier of this and the client's deadline
    # Programs with loops ("loops"), or all programs ("all"), run in worker processes that are killed past
    # execute_deadline_s (or the client's deadline), so a loop that never ends cannot hold a slot for ever.
    isolate_executions: str = "loops"
    execute_deadline_s: float = 60.0
    # Security (docs/security.md). Tokens: a file of one per line, re-read when it changes, and/or a list;
    # either turns bearer-token authentication on. TLS when cert and key are set; mutual with a client CA.
    auth_tokens_file: str = ""
    auth_tokens: tuple[str, ...] = ()
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_client_ca_file: str = ""
    # Weights become parameters bound at Execute: float constants of at least lift_min_float_elements
    # elements, and any constant of at least lift_threshold_bytes (0 keeps every constant in the program).
    lift_threshold_bytes: int = 64 << 10
    lift_min_float_elements: int = 16
    max_loaded: int = 1024  # executable ids (program + weights bindings) kept loaded, LRU
    max_weight_bytes: int = 4 * GIB  # device-resident weights of the loaded ids; the least recently used go
    # Resident tensors (docs/data_plane.md): outputs kept on the device under handles, freed by FreeTensors or
    # after their time to live (an output's ttl_s, else resident_ttl_s); past these an Execute that keeps
    # outputs is RESOURCE_EXHAUSTED.
    max_resident_bytes: int = 1 * GIB
    max_resident_tensors: int = 4096
    resident_ttl_s: float = 600.0
    # Variable states (docs/training.md): resource variables kept on a device between Executes, until DeleteState;
    # past these a CreateState is RESOURCE_EXHAUSTED.
    max_state_bytes: int = 4 * GIB
    max_states: int = 256
    # Device memory (docs/security.md): the weights, resident tensors and variable states on one device count together
    # against that device's budget; a bind past it drops the device's least recently used bindings first, and what
    # still does not fit is RESOURCE_EXHAUSTED (nothing resident or stateful is ever dropped). 0 derives the budget
    # per device (execute/device_budget.py): on a GPU 80% of what PJRT says it holds (memory_stats' bytes_limit, the
    # pool gpu_memory_fraction preallocates), the rest left to programs' temporaries; on the CPU, whose memory is the
    # host's and PJRT reports none, max_weight_bytes + max_resident_bytes + max_state_bytes, the bound before.
    max_device_bytes: int = 0
    # The share of each GPU's memory that `xlacs serve` has JAX preallocate (XLA_PYTHON_CLIENT_MEM_FRACTION, set before
    # JAX starts unless the environment sets it; JAX's own default is 0.75): the daemon owns its GPUs, leaving the
    # rest to the CUDA context and execution workers (which allocate as they go). To share a GPU with another process,
    # lower it (0.45 each for two daemons) or set XLA_PYTHON_CLIENT_PREALLOCATE=false (docs/gpu.md, Memory).
    gpu_memory_fraction: float = 0.9
    # A feed's unknown (-1) dims are padded to buckets (docs/dynamic_shapes.md): the powers of two up to this when
    # a Compile names none, and no explicit bucket may be larger.
    max_bucket_size: int = 64
    # Same-host shared memory (docs/data_plane.md): who may register regions ("off"; "local": loopback and
    # Unix-socket clients; "any": every client, as for one in a container sharing the host's /dev/shm), how many
    # sessions may be open (OpenSession calls; they hold no gRPC thread) and regions each may have.
    shared_memory: str = "local"
    max_sessions: int = 64
    max_session_regions: int = 64
    # glibc's malloc tunables `xlacs serve` runs with (GLIBC_TUNABLES, read only when a process starts: serve
    # re-executes itself with them when its environment lacks them; "" for none). hugetlb=1 has malloc ask for
    # transparent huge pages, so XLA:CPU's fresh output buffers fault in 2 MiB at a time: 256 MiB in and out through
    # shared memory 215 -> 79-114 ms at load 4, the daemon's RSS after four compiles no higher (docs/data_plane.md).
    malloc_tunables: str = "glibc.malloc.hugetlb=1"
    dump_graphs: str = ""  # a directory: the graph after each pass, as pbtxt
    # XLA debug options set on every compile, `name=value`, over xlacs's defaults (compile/xla_options.py DEFAULTS):
    # an option of a default's name replaces its value, `-name` drops it so that XLA's own applies. Checked at start
    # and part of the cache key, as merged. XLA_FLAGS in the environment is checked at start too. The one default,
    # `xla_cpu_experimental_ynn_fusion_type=auto`, is xlacs's choice per program: YNNPACK takes the dots of a program
    # without convolutions (transformers), and nothing of the others, whose convolutions run on Eigen's kernels,
    # faster on all five CNNs (docs/performance.md, XLA:CPU's convolution library, Transformers on XLA:CPU).
    xla_options: tuple[str, ...] = ()
    # Tiered compilation (docs/performance.md): a cold compile of a per-call program of at least this many StableHLO
    # ops on XLA:CPU answers with a program compiled by quick options (LLVM's optimizations off) and compiles the
    # optimized one in the background, which then replaces it and is what the shared cache tiers hold; 0 turns it
    # off. MobileNetV2's per-call program has 1444 ops and ResNet50's 1634; the five Keras CNNs' quick compiles
    # take 0.33-0.52x the time of the optimized ones.
    tiered_min_ops: int = 500
    # The cache tier behind L1 (docs/cache.md): Redis when redis_url is set, else this directory ("" for none).
    redis_url: str = ""
    cache_dir: str = "~/.cache/xlacs"
    # The HMAC key of cache entries; Redis needs one shared by every replica. A directory without one keeps
    # a random key in DIR/secret.
    cache_secret: str = ""
    cache_secret_file: str = ""
    cache_key_prefix: str = "xlacs:"  # Redis keys start with it, so that deployments can share one Redis
    cache_ttl_s: int = 7 * 24 * 3600  # an entry unused this long expires (0: never)
    cache_max_entry_bytes: int = 512 << 20  # bigger executables stay in L1 only
    cache_dir_max_bytes: int = 8 * GIB  # the directory tier evicts least recently used entries beyond this
    cache_lease_s: float = 10.0  # a replica that compiles holds the Redis lease this long past its last renewal
    # Blobs (tensor contents, graph skeletons) and graph manifests of compiles by digest (docs/cache.md, Blobs)
    # sit in the same tiers: in this process up to blob_memory_bytes (LRU), then in Redis or the directory (whose
    # blobs/ subdirectory cache_dir_max_bytes bounds too). One blob is at most max_graph_bytes.
    blob_memory_bytes: int = 1 * GIB
    # A model repository (docs/model_repository.md): DIR/<model>/config.pbtxt and DIR/<model>/<version>/, served
    # by name over the Open Inference Protocol; "" for none.
    model_repository: str = ""
    # Or TensorFlow Serving's models (docs/tf_serving.md): a ModelServerConfig in protobuf text (the models.config of
    # tensorflow_model_server --model_config_file), or one model, model_name ("" for TF Serving's "default") at
    # model_base_path; each BASE/<version>/saved_model.pb. Either one, exclusive with model_repository.
    model_config_file: str = ""
    model_name: str = ""
    model_base_path: str = ""
    # TF Serving's --allow_version_labels_for_unavailable_models: a new label may name a version not loaded yet (at
    # start, when none is): without it a label must name a version that serves.
    allow_version_labels_for_unavailable_models: bool = False

    @classmethod
    def from_env(cls, environ=os.environ, **overrides) -> "Settings":
        """Defaults, then XLACS_<FIELD> variables, then explicit (flag) overrides that are not None."""
        values = {}
        for field in dataclasses.fields(cls):
            raw = environ.get(f"XLACS_{field.name.upper()}")
            if raw is not None:
                values[field.name] = _parse(field, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def _parse(field: dataclasses.Field, raw: str):
    if field.type in ("bool", bool):
        if raw.strip().lower() not in _BOOLEANS:
            raise ValueError(f"XLACS_{field.name.upper()}={raw!r} is not one of {', '.join(_BOOLEANS)}")
        return _BOOLEANS[raw.strip().lower()]
    if field.type in ("int", int):
        return int(raw)
    if field.type in ("float", float):
        return float(raw)
    if field.type.startswith("tuple"):
        return tuple(item.strip() for item in raw.split(",") if item.strip())
    return raw
