"""AttrValue protos <-> Python values: str, int, float, bool, np.dtype, shape tuple (None: unknown rank),
np.ndarray, FuncRef, and lists of those."""
import numpy as np

from xlacs import dtypes
from xlacs.v1 import tf_graph_pb2 as tf
from xlacs_server.graph import limits, tensor_proto
from xlacs_server.graph.ir import FuncRef


class Shape(tuple):
    """A TensorShape attr; a distinct type so that it encodes back as a shape, not a list of ints."""


class OpaqueDType(str):
    """A type attr numpy cannot hold (DT_STRING, DT_RESOURCE, DT_VARIANT, ...), kept by its TF enum name."""


def _dtype(enum: int):
    try:
        return dtypes.to_numpy(enum)
    except dtypes.UnsupportedDType:
        return OpaqueDType(tf.DataType.Name(enum) if enum in tf.DataType.values() else "DT_INVALID")


def _shape(proto):
    dims = tensor_proto.shape_of(proto)
    return None if dims is None else Shape(dims)


def _str(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def decode(value: tf.AttrValue, max_elements: int):
    kind = value.WhichOneof("value")
    if kind == "s":
        return _str(value.s)
    if kind in ("i", "f", "b"):
        return getattr(value, kind)
    if kind == "type":
        return _dtype(value.type)
    if kind == "shape":
        return _shape(value.shape)
    if kind == "tensor":
        return tensor_proto.to_numpy(value.tensor, max_elements)
    if kind == "func":
        return _func(value.func, max_elements)
    if kind == "placeholder":
        return value.placeholder
    if kind == "list":
        lst = value.list
        for field, convert in (("s", _str), ("i", int), ("f", float), ("b", bool), ("type", _dtype),
                               ("shape", _shape), ("tensor", lambda t: tensor_proto.to_numpy(t, max_elements)),
                               ("func", lambda f: _func(f, max_elements))):
            items = getattr(lst, field)
            if len(items):
                limits.budget().list_length(len(items), f"a list attr of {field}")
                return [convert(item) for item in items]
        return []
    return None


def _func(proto: tf.NameAttrList, max_elements: int) -> FuncRef:
    return FuncRef(proto.name, {k: decode(v, max_elements) for k, v in proto.attr.items()})


def encode(value) -> tf.AttrValue:
    if isinstance(value, bool):
        return tf.AttrValue(b=value)
    if isinstance(value, (int, np.integer)):
        return tf.AttrValue(i=int(value))
    if isinstance(value, float):
        return tf.AttrValue(f=value)
    if isinstance(value, OpaqueDType):
        return tf.AttrValue(type=tf.DataType.Value(value))
    if isinstance(value, str):
        return tf.AttrValue(s=value.encode("utf-8", "surrogateescape"))
    if isinstance(value, np.dtype):
        return tf.AttrValue(type=dtypes.from_numpy(value))
    if isinstance(value, Shape) or value is None:
        return tf.AttrValue(shape=_encode_shape(value))
    if isinstance(value, np.ndarray):
        return tf.AttrValue(tensor=tensor_proto.from_numpy(value))
    if isinstance(value, FuncRef):
        return tf.AttrValue(func=_encode_func(value))
    if isinstance(value, list):
        out = tf.AttrValue(list=tf.AttrValue.ListValue())
        for item in value:
            single = encode(item)
            kind = single.WhichOneof("value")
            target = getattr(out.list, kind)
            if kind in ("shape", "tensor", "func"):
                target.add().CopyFrom(getattr(single, kind))
            else:
                target.append(getattr(single, kind))
        return out
    raise TypeError(f"cannot encode attr value {value!r}")


def _encode_shape(shape) -> tf.TensorShapeProto:
    if shape is None:
        return tf.TensorShapeProto(unknown_rank=True)
    return tf.TensorShapeProto(dim=[tf.TensorShapeProto.Dim(size=d) for d in shape])


def _encode_func(ref: FuncRef) -> tf.NameAttrList:
    out = tf.NameAttrList(name=ref.name)
    for key, val in ref.attrs.items():
        out.attr[key].CopyFrom(encode(val))
    return out
