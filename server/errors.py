"""Typed errors of the daemon. Each carries its gRPC status; one interceptor maps them (server/rpc)."""
import grpc


class XlacsError(Exception):
    code = grpc.StatusCode.INTERNAL


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
        super().__init__(message)


class NotConstant(XlacsError):
    """An input that must be known at compile time depends on a runtime value."""
    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, node: str, op: str, input_name: str):
        super().__init__(f"node {node!r} ({op}): input {input_name!r} must be a compile-time constant, "
                         "but it depends on a feed; make it a Const or compute it from shapes only")


class LoweringFailed(XlacsError):
    """A node's lowering rejected its inputs or attrs (a shape mismatch, an unsupported attr value, ...)."""
    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, node: str, op: str, reason: str):
        super().__init__(f"node {node!r} ({op}): {reason}")


class NotFound(XlacsError):
    code = grpc.StatusCode.NOT_FOUND


class DeviceUnavailable(XlacsError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class LimitExceeded(XlacsError):
    """A request is over one of the daemon's limits; the message names the setting that raises it."""
    code = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(self, what: str, setting: str, limit):
        self.what, self.setting, self.limit = what, setting, limit
        super().__init__(f"{what}: over the limit {setting}={limit} (raise it with XLACS_{setting.upper()})")


class Cancelled(XlacsError):
    """The client cancelled the call or went away; the work stopped at its next stage."""
    code = grpc.StatusCode.CANCELLED


class DeadlineExceeded(XlacsError):
    """The call ran past the client's deadline or the server's own (compile_deadline_s)."""
    code = grpc.StatusCode.DEADLINE_EXCEEDED
