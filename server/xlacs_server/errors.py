"""Typed errors of the daemon. Each carries its gRPC status and machine-readable details (google.rpc error
details: an ErrorInfo naming the error and the node, op, attr or input it is about; a BadRequest field
violation when the request is at fault); one interceptor maps them (server/xlacs_server/rpc/errors.py).

Who is at fault decides the class: the graph or request (INVALID_ARGUMENT), a limit of xlacs (UNIMPLEMENTED,
RESOURCE_EXHAUSTED), or xlacs itself (INTERNAL: a lowering that fails on a node is a bug of xlacs, never the
graph's).
"""
import re

import grpc
from google.protobuf import message
from google.rpc import error_details_pb2
from xlacs.v1 import xlacs_pb2

DOMAIN = "xlacs"
ECHO_CHARS = 80  # a request value quoted in a message is cut to this: an error must not grow with its input


def echoed(value: str | bytes) -> str:
    """`value` quoted for a message (bytes escaped), cut to ECHO_CHARS characters or bytes."""
    if len(value) <= ECHO_CHARS:
        return repr(value)
    return f"{value[:ECHO_CHARS]!r}... ({len(value)} {'bytes' if isinstance(value, bytes) else 'characters'})"


class XlacsError(Exception):
    code = grpc.StatusCode.INTERNAL

    def __init__(self, message: str = "", **metadata: str):
        super().__init__(message)
        self.metadata = {k: str(v) for k, v in metadata.items() if v is not None}

    @property
    def reason(self) -> str:
        """The ErrorInfo reason: the class name in UPPER_SNAKE_CASE (InvalidNode -> INVALID_NODE)."""
        return re.sub(r"(?<!^)(?=[A-Z])", "_", type(self).__name__).upper()

    def details(self) -> list[message.Message]:
        return [error_details_pb2.ErrorInfo(reason=self.reason, domain=DOMAIN, metadata=self.metadata)]


class InvalidGraph(XlacsError):
    """The GraphDef cannot be parsed or is not a well-formed graph."""
    code = grpc.StatusCode.INVALID_ARGUMENT


class InvalidRequest(XlacsError):
    """A feed, fetch, input or option of the request is wrong."""
    code = grpc.StatusCode.INVALID_ARGUMENT


class UnsupportedOps(XlacsError):
    """The graph holds ops without a lowering; lists every op type with one node each."""
    code = grpc.StatusCode.UNIMPLEMENTED

    def __init__(self, nodes_by_op: dict[str, list[str]], device: str, regions: list[dict] = ()):
        self.nodes_by_op = nodes_by_op
        listed = ", ".join(f"{op} (node {nodes[0]!r})" for op, nodes in sorted(nodes_by_op.items()))
        message = f"{len(nodes_by_op)} op type(s) have no lowering for {device}: {listed}"
        if regions:
            cuts = "; ".join(f"{len(r['nodes'])} node(s) from {r['inputs'][:3]} to {r['outputs'][:3]}"
                             for r in regions[:5])
            message += f". Unsupported region(s): {cuts}"
        super().__init__(message, device=device, ops=",".join(sorted(nodes_by_op)))

    def details(self) -> list[message.Message]:
        return [*super().details(), error_details_pb2.BadRequest(field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field=f"graph_def.node[{nodes[0]}].op",
                                                        description=f"{op} has no lowering")
            for op, nodes in sorted(self.nodes_by_op.items())])]


class NodeError(XlacsError):
    """An error at one node of the graph; names the node (`function/node` inside a function body), its op, and
    the attr or input at fault if there is one."""

    def __init__(self, node: str, op: str, reason: str, *, attr: str | None = None, input: str | None = None):
        self.node, self.op, self.attr, self.input = node, op, attr, input
        super().__init__(f"node {node!r} ({op}): {reason}", node=node, op=op, attr=attr, input=input)

    @property
    def field(self) -> str:
        """Where in the GraphDef the fault is, as a BadRequest field path."""
        field = f"graph_def.node[{self.node}]"
        return f"{field}.attr[{self.attr}]" if self.attr else f"{field}.input[{self.input}]" if self.input else field


class InvalidNode(NodeError):
    """The graph's fault: a node's attrs or inputs are not valid for its op (as TF's kernels would refuse)."""
    code = grpc.StatusCode.INVALID_ARGUMENT

    def details(self) -> list[message.Message]:
        violation = error_details_pb2.BadRequest.FieldViolation(field=self.field, description=str(self))
        return [*super().details(), error_details_pb2.BadRequest(field_violations=[violation])]


class NotConstant(InvalidNode):
    """An input that must be known at compile time depends on a runtime value."""

    def __init__(self, node: str, op: str, input_name: str):
        super().__init__(node, op, f"input {input_name!r} must be a compile-time constant, but it depends on a "
                                   "feed; make it a Const or compute it from shapes only", input=input_name)


class UnsupportedNode(NodeError):
    """A limit of xlacs: the op has a lowering, but not for this attr value or kind of input."""
    code = grpc.StatusCode.UNIMPLEMENTED


class DataDependentShape(UnsupportedNode):
    """An input whose values decide the shape of the output (Where, Unique, ...) depends on a feed: TF runs
    it, but an XLA program has static shapes."""

    def __init__(self, node: str, op: str, input_name: str):
        super().__init__(node, op, f"the shape of the output depends on the values of input {input_name!r}, which "
                                   "depends on a feed; XLA programs have static shapes, so this op is lowered only "
                                   "when that input is a compile-time constant", input=input_name)


class LoweringError(NodeError):
    """A bug in xlacs: a lowering rule failed on a node in a way it does not check for. The cause is logged
    with its traceback; the client gets INTERNAL with the node, the op and a request id."""
    code = grpc.StatusCode.INTERNAL

    def __init__(self, node: str, op: str, cause: BaseException):
        super().__init__(node, op, f"the lowering failed ({type(cause).__name__}); this is a bug in xlacs, "
                                   "not in the graph")


class NotFound(XlacsError):
    code = grpc.StatusCode.NOT_FOUND


class MissingBlobs(NotFound):
    """A Compile by digest needs what no cache tier holds: the graph's manifest (its digest is listed) or blobs
    it names. The details hold xlacs.v1.MissingBlobs, so the client uploads them and compiles again."""

    def __init__(self, graph: tuple[str, int], missing: list[tuple[str, int]]):
        self.missing = missing
        if list(missing) == [graph]:
            what = (f"no manifest of graph {graph[0]} ({graph[1]} bytes) is on this server: compile again with "
                    "graph_manifest, after uploading with UploadBlobs the blobs it names that FindMissingBlobs "
                    "lists")
        else:
            what = (f"{len(missing)} blob(s) of graph {graph[0]} are in no cache tier (evicted, or never "
                    "uploaded): upload them with UploadBlobs and compile again")
        super().__init__(f"{what}; the status details (xlacs.v1.MissingBlobs) list the digests", graph=graph[0],
                         missing=len(missing))

    def details(self) -> list[message.Message]:
        return [*super().details(), xlacs_pb2.MissingBlobs(
            digests=[xlacs_pb2.Digest(hash=h, size_bytes=size) for h, size in self.missing])]


class PermissionDenied(XlacsError):
    """The daemon's settings do not let this client do it; the message names the setting."""
    code = grpc.StatusCode.PERMISSION_DENIED


class UnknownState(NotFound):
    """A variable state's id (execute/states.py) names none on this daemon: it was deleted, the daemon restarted
    (states live only in memory), or another daemon holds it. Its own reason, so that a client tells it from an
    executable it must compile again."""

    def __init__(self, state_id: str):
        super().__init__(f"variable state {echoed(state_id)} is not on this server: it was deleted, the server "
                         "restarted (states live only in memory) or another server holds it; create it again from "
                         "its variables (CreateState)", state_id=state_id[:ECHO_CHARS])


class FailedPrecondition(XlacsError):
    """A request the daemon cannot serve in its present state, as TF Serving answers a signature its model lacks."""
    code = grpc.StatusCode.FAILED_PRECONDITION


class StateLost(XlacsError):
    """A variable state whose buffers a failed step had already donated to its program (execute/states.py): its
    values are gone, and only a new state brings the model back."""
    code = grpc.StatusCode.FAILED_PRECONDITION


class UnknownHandle(NotFound):
    """A resident tensor's handle (execute/resident.py) names none on this daemon: it was freed, its time to live
    ran out, or another daemon kept it. Its own reason, so that a client tells it from an executable it must
    compile again."""

    def __init__(self, handle: str, what: str):
        super().__init__(f"{what}: resident tensor {echoed(handle)} is not on this server: it was freed, its time to "
                         "live ran out, or another server kept it; keep the output again (OutputRequest.keep)",
                         handle=handle[:ECHO_CHARS])


class Unavailable(XlacsError):
    """What the call needs is not ready, and may be later: a served model that is loading, unloading or failed to
    load (its reason says which). The client may retry."""
    code = grpc.StatusCode.UNAVAILABLE


class ModelsNotAvailable(XlacsError):
    """Models that a reload of TF Serving's model server config loaded and that did not become available: UNKNOWN,
    as TF Serving answers them (its message lists each version with its load's error). The config stands."""
    code = grpc.StatusCode.UNKNOWN


class Unimplemented(XlacsError):
    """A part of a protocol xlacs does not offer (the Open Inference Protocol's shared-memory, trace or sequence
    extensions, ...); the message says what xlacs offers instead."""
    code = grpc.StatusCode.UNIMPLEMENTED


class DeviceUnavailable(XlacsError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class LimitExceeded(XlacsError):
    """A request is over one of the daemon's limits; the message names the setting that raises it."""
    code = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(self, what: str, setting: str, limit, raise_with: str = ""):
        """`raise_with` says where the limit is set when it is not a daemon setting (a model's config)."""
        self.what, self.setting, self.limit = what, setting, limit
        super().__init__(f"{what}: over the limit {setting}={limit} (raise it with "
                         f"{raise_with or 'XLACS_' + setting.upper()})", setting=setting, limit=limit)

    def details(self) -> list[message.Message]:
        violation = error_details_pb2.QuotaFailure.Violation(subject=self.setting, description=str(self))
        return [*super().details(), error_details_pb2.QuotaFailure(violations=[violation])]


class DeviceOutOfMemory(XlacsError):
    """XLA's allocator found no room on a device (its RESOURCE_EXHAUSTED, "Out of memory ..."), below the device's
    budget (execute/device_budget.py): the programs' temporaries and outputs need more than the budget leaves them,
    or another process holds the device's memory. The message names the budget's setting, to lower."""
    code = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(self, what: str, device: str, setting: str, limit: int, cause: str):
        self.setting, self.limit = setting, limit
        super().__init__(f"{what}: {device} is out of memory ({cause}); lower {setting}={limit} (XLACS_"
                         f"{setting.upper()}) to leave XLA more of the device, free resident tensors (FreeTensors) "
                         "or variable states (DeleteState) on it, or send smaller inputs", device=device,
                         setting=setting, limit=limit)

    def details(self) -> list[message.Message]:
        violation = error_details_pb2.QuotaFailure.Violation(subject=self.setting, description=str(self))
        return [*super().details(), error_details_pb2.QuotaFailure(violations=[violation])]


class Cancelled(XlacsError):
    """The client cancelled the call or went away; the work stopped at its next stage."""
    code = grpc.StatusCode.CANCELLED


class DeadlineExceeded(XlacsError):
    """The call ran past the client's deadline or the server's own (compile_deadline_s)."""
    code = grpc.StatusCode.DEADLINE_EXCEEDED
