"""numpy arrays <-> xlacs.v1.Tensor: dtype, shape and raw little-endian bytes; never pickles."""
import numpy as np

from xlacs import dtypes
from xlacs.v1 import xlacs_pb2


def to_proto(name: str, array) -> xlacs_pb2.Tensor:
    array = np.asarray(array)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return xlacs_pb2.Tensor(name=name, dtype=dtypes.from_numpy(array.dtype), shape=array.shape,
                            content=np.ascontiguousarray(array).tobytes())


def from_proto(tensor: xlacs_pb2.Tensor) -> np.ndarray:
    """A read-only view of the tensor's bytes (no copy). Raises ValueError when size and shape disagree."""
    dtype = dtypes.to_numpy(tensor.dtype)
    shape = tuple(tensor.shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"tensor {tensor.name!r} has a negative dimension in shape {list(shape)}")
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(tensor.content) != expected:
        raise ValueError(f"tensor {tensor.name!r} carries {len(tensor.content)} bytes but its shape "
                         f"{list(shape)} of {dtypes.dtype_name(tensor.dtype)} needs {expected}")
    return np.frombuffer(tensor.content, dtype=dtype).reshape(shape)
