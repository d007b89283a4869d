"""TensorFlow DataType <-> numpy dtype, shared by the client and the daemon; which dtypes xlacs carries, and why
it refuses the others."""
import ml_dtypes
import numpy as np

from xlacs.v1 import tf_graph_pb2 as tf

_BY_ENUM = {
    tf.DT_FLOAT: np.dtype(np.float32),
    tf.DT_DOUBLE: np.dtype(np.float64),
    tf.DT_HALF: np.dtype(np.float16),
    tf.DT_BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    tf.DT_INT8: np.dtype(np.int8),
    tf.DT_INT16: np.dtype(np.int16),
    tf.DT_INT32: np.dtype(np.int32),
    tf.DT_INT64: np.dtype(np.int64),
    tf.DT_UINT8: np.dtype(np.uint8),
    tf.DT_UINT16: np.dtype(np.uint16),
    tf.DT_UINT32: np.dtype(np.uint32),
    tf.DT_UINT64: np.dtype(np.uint64),
    tf.DT_BOOL: np.dtype(np.bool_),
    tf.DT_COMPLEX64: np.dtype(np.complex64),
    tf.DT_COMPLEX128: np.dtype(np.complex128),
}
SUPPORTED = tuple(_BY_ENUM.values())  # what xlacs feeds, holds as constants, executes and caches
_BY_DTYPE = {dtype: enum for enum, dtype in _BY_ENUM.items()}
# TF's Python names of every DataType ('float', 'half', 'qint8', 'string', ...), then numpy's of ours.
_NAMES = {**{name[3:].lower(): enum for name, enum in tf.DataType.items()
             if enum != tf.DT_INVALID and not name.endswith("_REF")},
          **{str(dtype): enum for enum, dtype in _BY_ENUM.items()}}
_QUANTIZED = (tf.DT_QINT8, tf.DT_QUINT8, tf.DT_QINT16, tf.DT_QUINT16, tf.DT_QINT32)


class UnsupportedDType(ValueError):
    """A dtype that xlacs cannot carry (strings, quantized types, resources, ...). The message reads
    "dtype qint8: <why, and what to do>", so that callers can prefix what has it: "feed 'x:0' has "."""


def _refusal(enum: int) -> UnsupportedDType:
    if enum in _QUANTIZED:
        why = "quantized dtypes are not supported by xlacs; dequantize to float32 first (tf.quantization.dequantize)"
    elif enum == tf.DT_STRING:
        why = "xlacs compiles numeric tensors only"
    else:
        why = f"xlacs supports {', '.join(map(str, SUPPORTED))}"
    name = tf.DataType.Name(enum)[3:].lower() if enum in tf.DataType.values() else f"DataType({enum})"
    return UnsupportedDType(f"dtype {name}: {why}")


def to_numpy(enum: int) -> np.dtype:
    """The numpy dtype of a TF DataType enum value; reference types map to their base type."""
    base = enum - 100 if enum > 100 else enum
    try:
        return _BY_ENUM[base]
    except KeyError:
        raise _refusal(base) from None


def from_numpy(dtype) -> int:
    """The TF DataType enum of a numpy dtype (or anything np.dtype accepts)."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise UnsupportedDType(f"unknown dtype {dtype!r}") from None
    if dtype in _BY_DTYPE:
        return _BY_DTYPE[dtype]
    if dtype.kind in "OSU":  # how numpy holds what TF calls DT_STRING
        raise _refusal(tf.DT_STRING)
    if dtype.names and len(dtype.names) == 1 and _NAMES.get(dtype.names[0]) in _QUANTIZED:
        raise _refusal(_NAMES[dtype.names[0]])  # TF's numpy stand-in for qint8 is [('qint8', 'i1')]
    raise UnsupportedDType(f"dtype {dtype}: xlacs supports {', '.join(map(str, SUPPORTED))}")


def parse(name: str) -> int:
    """A TF DataType from a user-facing name: 'float32', 'int64', 'bfloat16', 'half', 'DT_FLOAT', 'qint8', ...
    (to_numpy refuses the ones xlacs does not carry)."""
    if name.upper().startswith("DT_") and name.upper() in tf.DataType.keys():
        return tf.DataType.Value(name.upper())
    try:
        return _NAMES[name.lower()]
    except KeyError:
        known = sorted(n for n, enum in _NAMES.items() if enum in _BY_ENUM)
        raise UnsupportedDType(f"unknown dtype {name!r}; use one of {known}") from None


def dtype_name(enum: int) -> str:
    """The short name of a DataType, e.g. 'float32', or TF's enum name when numpy has none."""
    if enum in _BY_ENUM:
        return str(_BY_ENUM[enum])
    return tf.DataType.Name(enum) if enum in tf.DataType.values() else f"DataType({enum})"


def byte_view(array: np.ndarray) -> np.ndarray:
    """The array's bytes as a flat uint8 array, copied only when it is not contiguous, to hash: arrays of
    ml_dtypes' types (bfloat16) refuse the buffer protocol ("cannot include dtype 'E' in a buffer")."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)
