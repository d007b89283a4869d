"""TensorFlow DataType <-> numpy dtype, shared by the client and the daemon."""
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
_BY_DTYPE = {dtype: enum for enum, dtype in _BY_ENUM.items()}
_NAMES = {
    "float32": tf.DT_FLOAT, "float": tf.DT_FLOAT, "float64": tf.DT_DOUBLE, "double": tf.DT_DOUBLE,
    "float16": tf.DT_HALF, "half": tf.DT_HALF, "bfloat16": tf.DT_BFLOAT16,
    **{str(dtype): enum for enum, dtype in _BY_ENUM.items()},
}


class UnsupportedDType(ValueError):
    """A dtype that xlacs cannot carry (strings, quantized types, resources, ...)."""


def to_numpy(enum: int) -> np.dtype:
    """The numpy dtype of a TF DataType enum value; reference types map to their base type."""
    base = enum - 100 if enum > 100 else enum
    try:
        return _BY_ENUM[base]
    except KeyError:
        raise UnsupportedDType(f"dtype {dtype_name(enum)} is not supported") from None


def from_numpy(dtype) -> int:
    """The TF DataType enum of a numpy dtype (or anything np.dtype accepts)."""
    try:
        return _BY_DTYPE[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise UnsupportedDType(f"dtype {dtype} is not supported") from None


def parse(name: str) -> int:
    """A TF DataType from a user-facing name: 'float32', 'int64', 'bfloat16', 'DT_FLOAT', ..."""
    if name.upper().startswith("DT_") and name.upper() in tf.DataType.keys():
        return tf.DataType.Value(name.upper())
    try:
        return _NAMES[name.lower()]
    except KeyError:
        raise UnsupportedDType(f"unknown dtype {name!r}; use one of {sorted(_NAMES)}") from None


def dtype_name(enum: int) -> str:
    """The short name of a DataType, e.g. 'float32', or TF's enum name when numpy has none."""
    if enum in _BY_ENUM:
        return str(_BY_ENUM[enum])
    return tf.DataType.Name(enum) if enum in tf.DataType.values() else f"DataType({enum})"
