"""numpy arrays <-> xlacs.v1.Tensor: dtype, shape and raw little-endian bytes; never pickles."""
import numpy as np

from xlacs import dtypes
from xlacs.v1 import xlacs_pb2


def fill(tensor: xlacs_pb2.Tensor, name: str, array) -> xlacs_pb2.Tensor:
    """Writes `array` into `tensor`, usually a repeated field's `.add()`: a Tensor built apart and then put in
    its request copies all of its bytes again (docs/benchmarks.md, tensor transfer). Raises UnsupportedDType
    for a dtype xlacs does not carry (strings, ...)."""
    array = np.asarray(array)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    tensor.name = name
    tensor.dtype = dtypes.from_numpy(array.dtype)
    tensor.shape.extend(array.shape)
    tensor.content = np.ascontiguousarray(array).tobytes()
    return tensor


def to_proto(name: str, array) -> xlacs_pb2.Tensor:
    return fill(xlacs_pb2.Tensor(), name, array)


def from_proto(tensor: xlacs_pb2.Tensor) -> np.ndarray:
    """A read-only array on one copy of the tensor's bytes. Raises ValueError when size and shape disagree, and
    UnsupportedDType for a dtype xlacs does not carry."""
    try:
        dtype = dtypes.to_numpy(tensor.dtype)
    except dtypes.UnsupportedDType as e:
        raise dtypes.UnsupportedDType(f"tensor {tensor.name!r} has {e}") from None
    shape = tuple(tensor.shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"tensor {tensor.name!r} has a negative dimension in shape {list(shape)}")
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    content = tensor.content  # each read of a bytes field copies it out of the message
    if len(content) != expected:
        raise ValueError(f"tensor {tensor.name!r} carries {len(content)} bytes but its shape "
                         f"{list(shape)} of {dtypes.dtype_name(tensor.dtype)} needs {expected}")
    return np.frombuffer(content, dtype=dtype).reshape(shape)
