"""The Python client of xlacs.v1.Compiler."""
from __future__ import annotations

import contextlib
import json
from typing import Callable, Iterable, Mapping, Sequence, TypeVar

import grpc
import numpy as np

from xlacs import dtypes, resident, streaming, wire
from xlacs.auth import BearerToken
from xlacs.digests import FileDigests
from xlacs.errors import error_details
from xlacs.freeze import freeze
from xlacs.graph_source import GraphSource
from xlacs.local import BlobMemo, LocalExecutable, download
from xlacs.resident import ResidentTensor, fetch_tensors, free_tensors
from xlacs.saved_model import DEFAULT_SIGNATURE, SignatureExecutable, compile_saved_model
from xlacs.shared_memory import Regions
from xlacs.states import State, create_state
from xlacs.upload import UploadReport, compile_by_digest
from xlacs.v1 import xlacs_pb2, xlacs_pb2_grpc

T = TypeVar("T")
MAX_MESSAGE_BYTES = 2 * 1024 ** 3 - 1
INPUTS = xlacs_pb2.ExecuteRequest.INPUTS_FIELD_NUMBER
OUTPUTS = xlacs_pb2.ExecuteResponse.OUTPUTS_FIELD_NUMBER
VARIABLE_PREFIX = "variables/"  # the inputs of an unfrozen graph's resource variables
# A target that resolves to several replicas (dns:/// of a headless Service or a compose service): each
# channel connects to one of them at random and keeps it, so that clients spread over the replicas and a
# client's Compile and Executes reach the same one.
# The calls that are safe to repeat are tried again on UNAVAILABLE (a replica that went away, a load balancer with
# no replica ready yet), up to 4 attempts within about 3 s: they create nothing on the daemon that a second
# attempt would duplicate (a Compile is keyed by its graph; blobs by their digest). Execute is tried again by
# Executable.execute itself, only when it is a plain call (no state, nothing kept or shared on one replica).
RETRIED_METHODS = ("Compile", "CheckGraph", "ListOps", "GetStats", "GetExecutable", "FindMissingBlobs",
                   "UploadBlobs", "DownloadExecutable")
SERVICE_CONFIG = json.dumps({
    "loadBalancingConfig": [{"pick_first": {"shuffleAddressList": True}}],
    "methodConfig": [{"name": [{"service": "xlacs.v1.Compiler", "method": m} for m in RETRIED_METHODS],
                      "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.25s", "maxBackoff": "2s",
                                      "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]})


def _feed_spec(name: str, dtype, shape) -> xlacs_pb2.TensorSpec:
    """dtype: a numpy dtype, a name such as "float32", or a tf.DType; refused here, naming the feed, when
    xlacs does not carry it. A dim of None or -1 is known only at Execute (docs/dynamic_shapes.md)."""
    try:
        if hasattr(dtype, "as_datatype_enum"):  # a tf.DType
            enum = dtype.as_datatype_enum
        else:
            enum = dtypes.parse(dtype) if isinstance(dtype, str) else dtypes.from_numpy(dtype)
        dtypes.to_numpy(enum)
    except dtypes.UnsupportedDType as e:
        raise dtypes.UnsupportedDType(f"feed {name!r} has {e}") from None
    return xlacs_pb2.TensorSpec(name=name, dtype=enum, shape=[-1 if d is None else d for d in shape])


class Executable:
    """A compiled graph on the server. Call it with numpy arrays in feed order, or a {feed: array} dict.

    It keeps the graph's digest and where its bytes come from (the path, or the bytes or GraphDef object that
    was passed), not the bytes: a server that does not know the id (another replica behind a load balancer, or
    one that restarted or evicted it) answers NOT_FOUND, and the executable then compiles again there by
    digest, a cache hit when the replicas share a Redis, uploading only what that server lacks, and retries
    once. `upload` says what its Compile sent of the graph."""

    def __init__(self, client: "Client", response: xlacs_pb2.CompileResponse, request: xlacs_pb2.CompileRequest,
                 source: GraphSource, upload: UploadReport):
        self._client = client
        self._request = request
        self._source = source
        self.upload = upload
        self.id = response.executable_id
        self.signature = response.signature
        self.stage_ms = dict(response.stage_ms)
        self.cache = response.cache
        # "quick" when the daemon answered a tiered compile before its optimized program (wait_optimized), else
        # "optimized", as of the Compile (Client.executable_info tells now); "" for feeds of unknown dims, whose
        # buckets compile at the Executes that first need them.
        self.tier = response.tier
        self.passes = list(response.passes)
        self.graph_dumps = {d.name: d.pbtxt for d in response.graph_dumps}
        self.input_names = [s.name for s in response.signature.inputs]
        self.output_names = [s.name for s in response.signature.outputs]
        self._output_bytes = streaming.output_bytes(response.signature.outputs)

    @property
    def digest(self) -> xlacs_pb2.Digest:
        """The digest of the GraphDef's bytes."""
        return self._request.graph_digest

    def execute(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray], *,
                keep: bool | Iterable[str] = (), ttl_s: float = 0.0,
                out: Mapping[str, np.ndarray] | None = None,
                state: State | None = None) -> list[np.ndarray | ResidentTensor]:
        """Outputs in fetch order. An input may be a ResidentTensor (of the same daemon): its handle travels, not
        its bytes. The outputs named in `keep` (all of them with True) stay on the daemon's device and come back
        as ResidentTensors, for `ttl_s` seconds unless freed before (0: the daemon's resident_ttl_s).
        Shared memory (xlacs.SharedMemory): an input that is an array of an open SharedMemory of this client travels
        by reference, and `out` ({output: such an array}) has the daemon write outputs into them; those come back
        as the arrays of `out`. A call of numpy arrays alone that moves xlacs.streaming.STREAM_BYTES or more goes as
        an ExecuteStream, its tensors in pieces (docs/data_plane.md).
        With a variable `state` (Client.create_state), the variables come from it and the values the run assigns
        stay in it: `inputs` are the feeds, and the outputs are the fetches (docs/training.md)."""
        if not isinstance(inputs, Mapping):
            names = self.input_names if state is None else self.feed_names
            inputs = dict(zip(names, inputs, strict=True))
        regions, out = self._client.regions, out or {}
        shared = bool(out) or any(regions.ref(a) is not None for a in inputs.values())
        if state is None and not keep and not shared and all(isinstance(a, np.ndarray) for a in inputs.values()) and \
                streaming.moved_bytes(inputs, self._output_bytes) >= streaming.STREAM_BYTES:
            return self._streamed(inputs)
        request = xlacs_pb2.ExecuteRequest(executable_id=self.id, state_id=state.id if state else "")
        if keep or shared:  # the usual call asks nothing of its outputs and names no session
            request.session_id = regions.session_id if shared else ""
            request.outputs.extend([*resident.output_requests(self.output_names, keep, ttl_s),
                                    *regions.output_requests(out, self.output_names)])
        pieces = []  # each input as xlacs.wire writes it: its bytes copied once, into the request's
        for name, a in inputs.items():
            try:
                reference = regions.reference(name, a) if shared else None
                pieces.append((reference, None) if reference is not None else resident.input_piece(name, a))
            except dtypes.UnsupportedDType as e:
                raise dtypes.UnsupportedDType(f"input {name!r} has {e}") from None
        # A plain call holds nothing of one replica's: on UNAVAILABLE it is sent again, wherever the channel goes now.
        plain = state is None and not keep and not shared and all(isinstance(a, np.ndarray) for a in inputs.values())

        def send() -> tuple[xlacs_pb2.ExecuteResponse, list | None]:
            request.executable_id = self.id
            return self._client.execute_written(wire.encode(request, INPUTS, pieces), timeout=self._client.timeout)
        response, contents = self._failover(send, retry_unavailable=plain)  # contents: read in place (wire.read)
        return [out[t.name] if t.HasField("shared_memory") else
                resident.output(self._client, t, contents[i] if contents is not None else None)
                for i, t in enumerate(response.outputs)]

    def _failover(self, call: Callable[[], T], retry_unavailable: bool) -> T:
        """call()'s answer, call() naming this executable by self.id: where the daemon lacks the id (another replica,
        or one that restarted), compiled again there and called once more; on UNAVAILABLE (the replica went away),
        called once more when `retry_unavailable`."""
        recompiled = False
        while True:
            try:
                return call()
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNAVAILABLE and retry_unavailable:
                    retry_unavailable = False
                    continue
                # Not for a resident tensor or a state the daemon lacks: compiling again would not bring them back.
                if recompiled or e.code() != grpc.StatusCode.NOT_FOUND or \
                        error_details(e).reason in ("UNKNOWN_HANDLE", "UNKNOWN_STATE"):
                    raise
                self._recompile()
                recompiled = True

    def _streamed(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Outputs of an ExecuteStream call (xlacs.streaming): a plain call, sent again as Execute is."""
        return self._failover(lambda: streaming.execute(self._client.channel, self.id, inputs, self._client.timeout),
                              retry_unavailable=True)

    def _recompile(self) -> None:
        """Compiles again by digest, on a daemon that does not know this id, and takes the id it answers with."""
        response, _ = self._client._recompile(self._request, self._source)
        self.id = response.executable_id

    def wait_optimized(self) -> None:
        """Returns once the daemon runs this executable's optimized program (`tier` is then "optimized"; it stays
        "quick" only if the daemon's optimizing compile failed, which its log says): a cold compile of a large
        program answers with a program compiled with quick options first (docs/performance.md, Tiered
        compilation). Asks by digest, as a recompile does: a daemon that lost the id compiles it again. With
        feeds of unknown dims, the id becomes one whose buckets compile optimized at once."""
        request = xlacs_pb2.CompileRequest()
        request.CopyFrom(self._request)
        request.wait_optimized = True
        response, _ = self._client._recompile(request, self._source)
        self.id, self.tier = response.executable_id, response.tier

    def __call__(self, *arrays: np.ndarray, state: State | None = None) -> list[np.ndarray]:
        return self.execute(arrays, state=state)

    @property
    def feed_names(self) -> list[str]:
        """The inputs but the variables: what an Execute with a variable state sends."""
        return [n for n in self.input_names if not n.startswith(VARIABLE_PREFIX)]

    def local(self) -> LocalExecutable:
        """This executable downloaded and run in this process, called the same way (xlacs.local; needs the `local`
        extra); where this process cannot run it, one that calls the daemon and says why (`runs`, `reason`).
        Weights downloaded before by this client are not sent again. A daemon that does not know the id
        compiles it again by digest first, as for execute."""
        return self._failover(lambda: download(self._client, self.id, self._client.blob_memo, self.execute),
                              retry_unavailable=False)


class Client:
    """`credentials`: TLS (see xlacs.tls_credentials); `token`: sent as `authorization: Bearer <token>`."""

    def __init__(self, target: str, *, timeout: float | None = None,
                 credentials: grpc.ChannelCredentials | None = None, token: str | None = None):
        options = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), ("grpc.service_config", SERVICE_CONFIG),
                   # A connection of its own: gRPC would otherwise share one between the channels of a process
                   # that have the same target and options, and a load balancer would then see one client.
                   ("grpc.use_local_subchannel_pool", 1),
                   *streaming.CHANNEL_OPTIONS]
        self.channel = (grpc.secure_channel(target, credentials, options) if credentials
                        else grpc.insecure_channel(target, options))
        if token:
            self.channel = grpc.intercept_channel(self.channel, BearerToken(token))
        self.stub = xlacs_pb2_grpc.CompilerStub(self.channel)
        # Execute with its request written and its response read by xlacs.wire: a tensor's bytes are copied once
        # each way, not three times
        self.execute_written = self.channel.unary_unary(
            "/xlacs.v1.Compiler/Execute", request_serializer=wire.as_is,
            response_deserializer=lambda data: wire.read(data, xlacs_pb2.ExecuteResponse, OUTPUTS))
        self.timeout = timeout
        self.file_digests = FileDigests()  # compiling a file again hashes nothing
        self.blob_memo = BlobMemo()  # the weights of downloaded executables (Executable.local)
        self.regions = Regions(self.stub)  # the session of this client's SharedMemory regions

    def compile(self, graph, feeds: Mapping[str, tuple], fetches: Iterable[str], device: str = "",
                name: str = "", dump_graphs: bool = False, bucket_sizes: Sequence[int] = (),
                wait_optimized: bool = False) -> Executable:
        """graph: a GraphDef message (ours or TF's), serialized bytes, or a path to a .pb file.
        feeds: {"x:0": (dtype, shape)}; dtype may be a numpy dtype, a name such as "float32", or a tf.DType.
        A dtype xlacs does not carry (strings, quantized types) raises UnsupportedDType naming the feed.
        A dim of None or -1 is known only at Execute: the daemon pads it to the smallest of `bucket_sizes`
        (default: powers of two up to its max_bucket_size) that holds it, and slices the outputs back.
        The graph travels by digest; its bytes only when the daemon lacks them, and then only the blobs it
        lacks (Executable.upload). With dump_graphs, Executable.graph_dumps holds the graph after each pass
        as pbtxt. A cold compile of a large program answers as soon as a program compiled with quick options runs
        (Executable.tier "quick"), and the daemon swaps in the optimized one when it is compiled; with
        wait_optimized, the call waits for it (docs/performance.md, Tiered compilation)."""
        source = GraphSource(graph)
        request = xlacs_pb2.CompileRequest(
            fetches=list(fetches), device=device, graph_name=name, dump_graphs=dump_graphs,
            feeds=[_feed_spec(n, d, s) for n, (d, s) in feeds.items()], bucket_sizes=list(bucket_sizes),
            wait_optimized=wait_optimized)
        with source.open(self.file_digests) as (digest, data):
            request.graph_digest.CopyFrom(digest)
            response, upload = compile_by_digest(self.stub, request, lambda: contextlib.nullcontext(data),
                                                 self.timeout)
        request.ClearField("graph_manifest")
        return Executable(self, response, request, source, upload)

    def _recompile(self, request: xlacs_pb2.CompileRequest,
                   source: GraphSource) -> tuple[xlacs_pb2.CompileResponse, UploadReport]:
        """Compiles `request` by its digest again, reading `source` only if the daemon lacks the graph."""
        request = xlacs_pb2.CompileRequest(graph_digest=request.graph_digest, feeds=request.feeds,
                                           fetches=request.fetches, device=request.device,
                                           graph_name=request.graph_name, bucket_sizes=request.bucket_sizes,
                                           wait_optimized=request.wait_optimized)
        return compile_by_digest(self.stub, request, lambda: source.reopen(self.file_digests, request.graph_digest),
                                 self.timeout)

    def compile_function(self, fn, *input_signature, device: str = "", name: str = "",
                         lower_control_flow: bool = True, bucket_sizes: Sequence[int] = ()) -> Executable:
        """Freezes a tf.function for `input_signature` (tf.TensorSpecs) with TensorFlow, then compiles it. A
        None dim (tf.TensorSpec([None, 224, 224, 3])) compiles into shape buckets, as in `compile`."""
        frozen = freeze(fn, *input_signature, lower_control_flow=lower_control_flow)
        return self.compile(frozen.graph_def, frozen.feeds, frozen.fetches, device=device,
                            name=name or getattr(fn, "__name__", ""), bucket_sizes=bucket_sizes)

    def compile_saved_model(self, directory, signature: str = DEFAULT_SIGNATURE, *,
                            shapes: Mapping[str, Sequence[int]] | None = None, device: str = "", name: str = "",
                            **options) -> SignatureExecutable:
        """Compiles a signature of a SavedModel directory (tf.saved_model.save, Keras model.export()), read here
        without TensorFlow: its variables are frozen into the graph as constants (docs/saved_model.md).
        shapes: {input name: shape} for dimensions the signature leaves unknown. The executable takes the
        signature's inputs by name and returns a dict by output name. A directory that is not a SavedModel, or a
        signature it lacks, raises SavedModelError (which lists the signatures it has)."""
        return compile_saved_model(self, directory, signature, shapes, device=device, name=name, **options)

    def check(self, graph, device: str = "") -> xlacs_pb2.CheckGraphResponse:
        return self.stub.CheckGraph(xlacs_pb2.CheckGraphRequest(graph_def=GraphSource(graph).read(), device=device),
                                    timeout=self.timeout)

    def ops(self) -> list[xlacs_pb2.OpLowering]:
        return list(self.stub.ListOps(xlacs_pb2.ListOpsRequest(), timeout=self.timeout).ops)

    def stats(self) -> xlacs_pb2.Stats:
        return self.stub.GetStats(xlacs_pb2.GetStatsRequest(), timeout=self.timeout)

    def fetch(self, resident_tensors: Iterable[ResidentTensor]) -> list[np.ndarray]:
        """The values of resident tensors, copied here in one call; they stay on the daemon."""
        return fetch_tensors(self, resident_tensors)

    def free(self, resident_tensors: Iterable[ResidentTensor]) -> tuple[int, int]:
        """Frees resident tensors on the daemon in one call: (tensors, bytes) freed, without those already gone."""
        return free_tensors(self, resident_tensors)

    def create_state(self, source, *, device: str = "", names: Mapping[str, str] | None = None) -> State:
        """A variable state on the daemon (docs/training.md), from `source`: {variable name: array}, named as the
        executable's inputs without "variables/"; a SavedModel directory (its variables by name); or a checkpoint's
        prefix (its tensors by key). `names` ({state name: source name}) picks and renames. On `device`, the
        daemon's default when empty: the executables that use it must run there."""
        return create_state(self, source, device, names)

    def executable_info(self, executable_id: str) -> xlacs_pb2.ExecutableInfo:
        return self.stub.GetExecutable(xlacs_pb2.GetExecutableRequest(executable_id=executable_id),
                                       timeout=self.timeout)

    def close(self) -> None:
        self.regions.close()
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
