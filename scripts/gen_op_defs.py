"""Generates server/xlacs_server/graph/data/op_list.pb: the OpDef of every op TensorFlow registers, as an OpList.

The daemon checks each NodeDef against its op, as TensorFlow's ValidateNodeDef does (attr kinds, required
attrs, minimums, the number of inputs), lowers nodes with the attr defaults TF's OpDefs declare, and numbers
the outputs of FunctionDef nodes by their OpDefs' output args, all without importing TensorFlow. The file is
TensorFlow's own op_def.proto wire format (the daemon parses it with the subset in protos/xlacs/v1/tf_graph.proto)
without the ops' documentation, made by this script only; a test checks that it is up to date.
"""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "server" / "xlacs_server" / "graph" / "data" / "op_list.pb"


def op_list() -> bytes:
    """The installed TensorFlow's OpList, ops sorted by name, summaries and descriptions removed."""
    import tensorflow as tf  # noqa: F401  (registers the ops)
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    registered = op_def_pb2.OpList()
    registered.ParseFromString(pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList()))
    ops = op_def_pb2.OpList(op=sorted(registered.op, key=lambda op: op.name))
    for op in ops.op:
        op.ClearField("summary")
        op.ClearField("description")
        for part in (*op.input_arg, *op.output_arg, *op.attr):
            part.ClearField("description")
    return ops.SerializeToString(deterministic=True)


if __name__ == "__main__":
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(op_list())
