"""One-node graphs that TF's kernels refuse, built node by node (TF's own graph builder runs the shape
functions first and would refuse to build them), compiled over gRPC: the status and the details say which
node, input or attr is at fault. TF, run eagerly through tf.raw_ops, confirms that it refuses them too."""
import dataclasses
import re

import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests.graphs import GraphBuilder
from xlacs import error_details
from xlacs_server.graph import attrs


@dataclasses.dataclass(frozen=True)
class Fed:
    """An input fed at run time (a Placeholder), known by its shape and dtype only."""
    shape: tuple
    dtype: type = np.float32


def one_node(op: str, inputs: dict, **attr_values) -> tuple[bytes, dict, str]:
    """A graph of `op` on `inputs` (name -> constant array or Fed), named "node"; its feeds and its fetch."""
    graph, feeds, names = GraphBuilder(), {}, []
    for name, value in inputs.items():
        if isinstance(value, Fed):
            graph.node(name, "Placeholder", dtype=np.dtype(value.dtype), shape=attrs.Shape(value.shape))
            feeds[f"{name}:0"] = (np.dtype(value.dtype), tuple(value.shape))
        else:
            graph.const(name, value)
        names.append(name)
    graph.node("node", op, *names, **{k: np.dtype(v) if isinstance(v, type) else v for k, v in attr_values.items()})
    return graph.bytes(), feeds, "node:0"


def refusal(client, op: str, inputs: dict, **attr_values) -> grpc.RpcError:
    """The error compiling one `op` node on `inputs` gives."""
    graph_def, feeds, fetch = one_node(op, inputs, **attr_values)
    with pytest.raises(grpc.RpcError) as e:
        client.compile(graph_def, feeds, [fetch])
    return e.value


def assert_refused(client, op: str, inputs: dict, *, blame: dict, match: str,
                   code=grpc.StatusCode.INVALID_ARGUMENT, **attr_values) -> None:
    """Compiling fails with `code`, naming the node and op, blaming blame={"input" or "attr": name}, and with a
    message matching the regular expression `match`."""
    error = refusal(client, op, inputs, **attr_values)
    details = error_details(error)
    assert error.code() == code, error.details()
    assert error.details().startswith(f"node 'node' ({op}): "), error.details()
    assert {k: details.metadata.get(k) for k in blame} == blame, details.metadata
    assert any(v in error.details() for v in blame.values()), error.details()
    assert re.search(match, error.details()), error.details()


def assert_tf_refuses(run, match: str | None = None) -> None:
    """TF's kernel refuses the same: `run()` raises InvalidArgumentError."""
    with pytest.raises(tf.errors.InvalidArgumentError, match=match):
        run()


def assert_refused_as_tf(client, case: tuple) -> None:
    """case = (op, inputs, attrs, blame, match, run): TF refuses `run()` (the same node, eagerly), and compiling
    the node is INVALID_ARGUMENT blaming `blame` with a message matching `match`."""
    op, inputs, attr_values, blame, match, run = case
    assert_tf_refuses(run)
    assert_refused(client, op, inputs, blame=blame, match=match, **attr_values)


def ints(*values, dtype=np.int32) -> np.ndarray:
    return np.array(values, dtype)
