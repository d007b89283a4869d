"""TF TensorProto <-> numpy, with TF's rules: tensor_content, or typed values where the last value repeats.

A tensor of one value repeated (a splat: a shape and zero or one value, which TF fills in) becomes a
read-only broadcast view of that value, which allocates nothing: a 100-byte request can declare a tensor of
2^29 elements. Other repeated values are filled in within the request's budget (graph/limits.py).
"""
import numpy as np

from xlacs import dtypes
from xlacs.v1 import tf_graph_pb2 as tf
from xlacs_server.errors import LimitExceeded
from xlacs_server.graph import limits

MAX_RANK = 64  # numpy's; TF allows 254

# Which repeated field holds the values of each dtype when tensor_content is empty.
_VALUE_FIELD = {
    tf.DT_FLOAT: "float_val", tf.DT_DOUBLE: "double_val", tf.DT_INT32: "int_val", tf.DT_INT16: "int_val",
    tf.DT_INT8: "int_val", tf.DT_UINT8: "int_val", tf.DT_UINT16: "int_val", tf.DT_INT64: "int64_val",
    tf.DT_UINT32: "uint32_val", tf.DT_UINT64: "uint64_val", tf.DT_BOOL: "bool_val",
    tf.DT_HALF: "half_val", tf.DT_BFLOAT16: "half_val", tf.DT_COMPLEX64: "scomplex_val",
    tf.DT_COMPLEX128: "dcomplex_val", tf.DT_STRING: "string_val",
}


class BadTensor(ValueError):
    pass


class UnsupportedTensor(ValueError):
    """A tensor TF accepts that xlacs cannot hold."""


def is_splat(array: np.ndarray) -> bool:
    """Whether `array` is one value broadcast (as to_numpy makes a splat): all its strides are 0."""
    return array.size > 1 and not any(array.strides)


def shape_of(shape_proto: tf.TensorShapeProto):
    """A TensorShapeProto as a tuple (-1 for unknown dims), or None for unknown rank."""
    if shape_proto.unknown_rank:
        return None
    return tuple(d.size for d in shape_proto.dim)


def to_numpy(proto: tf.TensorProto, max_elements: int) -> np.ndarray:
    shape = shape_of(proto.tensor_shape) or ()
    if any(d < 0 for d in shape):
        raise BadTensor(f"tensor shape {list(shape)} has a negative dimension")
    if len(shape) > MAX_RANK:
        raise UnsupportedTensor(f"a tensor of rank {len(shape)}: xlacs holds tensors of rank {MAX_RANK} at most")
    count = int(np.prod(shape, dtype=np.float64))
    if count > max_elements:
        raise LimitExceeded(f"tensor of shape {list(shape)} has {count} elements", "max_tensor_elements", max_elements)
    kind = proto.dtype - 100 if proto.dtype > 100 else proto.dtype  # a reference type holds its base type
    if kind == tf.DT_STRING:
        values = np.array(list(proto.string_val), dtype=object)
        return _fill(values, count, shape, kind)
    dtype = dtypes.to_numpy(kind)
    content = proto.tensor_content  # read once: each read of a bytes field copies it
    if content:
        if len(content) != count * dtype.itemsize:
            raise BadTensor(f"tensor_content has {len(content)} bytes but shape {list(shape)} "
                            f"of {dtype} needs {count * dtype.itemsize}")
        return np.frombuffer(content, dtype=dtype).reshape(shape)
    values = getattr(proto, _VALUE_FIELD[kind])
    if kind in (tf.DT_HALF, tf.DT_BFLOAT16):
        values = np.array(values, dtype=np.uint16).view(dtype)
    elif kind in (tf.DT_COMPLEX64, tf.DT_COMPLEX128):
        pairs = np.array(values, dtype=np.float64).reshape(-1, 2)
        values = (pairs[:, 0] + 1j * pairs[:, 1]).astype(dtype)
    else:
        values = np.array(values, dtype=dtype)
    return _fill(values, count, shape, kind)


def _fill(values: np.ndarray, count: int, shape, dtype_enum) -> np.ndarray:
    if len(values) > count:
        raise BadTensor(f"tensor holds {len(values)} values but shape {list(shape)} has {count} elements")
    if len(values) == count:
        return values.reshape(shape)
    if len(values) <= 1:  # a splat: TF fills in zeros, or the one value
        value = values[0] if len(values) else (b"" if dtype_enum == tf.DT_STRING else 0)
        return np.broadcast_to(np.array(value, dtype=values.dtype), shape)
    limits.budget().fill(count * values.itemsize, f"a tensor of shape {list(shape)} holding {len(values)} values")
    filled = np.empty(count, dtype=values.dtype)
    filled[:len(values)] = values  # TF repeats the last value to fill the shape
    filled[len(values):] = values[-1]
    return filled.reshape(shape)


def from_numpy(array: np.ndarray) -> tf.TensorProto:
    """An object array is a DT_STRING tensor of bytes, as to_numpy makes it."""
    proto = tf.TensorProto(dtype=tf.DT_STRING if array.dtype == object else dtypes.from_numpy(array.dtype))
    proto.tensor_shape.dim.extend(tf.TensorShapeProto.Dim(size=d) for d in array.shape)
    if is_splat(array):  # one value, which TF fills in: as compact as it came
        array = array.reshape(-1)[:1]
        if array.dtype == object:
            proto.string_val.extend(v if isinstance(v, bytes) else str(v).encode() for v in array)
        else:
            _put_values(proto, array)
    elif array.dtype == object:
        proto.string_val.extend(v if isinstance(v, bytes) else str(v).encode() for v in array.reshape(-1))
    else:
        proto.tensor_content = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    return proto



def _put_values(proto: tf.TensorProto, values: np.ndarray) -> None:
    """Typed values in the field TF reads for the proto's dtype."""
    field = getattr(proto, _VALUE_FIELD[proto.dtype])
    if proto.dtype in (tf.DT_HALF, tf.DT_BFLOAT16):
        field.extend(values.view(np.uint16).tolist())
    elif proto.dtype in (tf.DT_COMPLEX64, tf.DT_COMPLEX128):
        field.extend(np.stack([values.real, values.imag], -1).reshape(-1).tolist())
    else:
        field.extend(values.tolist())
