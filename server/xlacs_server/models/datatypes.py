"""The Open Inference Protocol's tensor datatypes ("FP32", "INT64", ...) <-> numpy dtypes, and Triton's config
types (TYPE_FP32, ...) -> datatypes. BYTES (strings) is a datatype of the protocol that xlacs cannot carry."""
import ml_dtypes
import numpy as np

from xlacs import dtypes
from xlacs_server.errors import InvalidRequest
from xlacs_server.models.v2 import model_config_pb2

_BY_DATATYPE = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8), "UINT16": np.dtype(np.uint16), "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8), "INT16": np.dtype(np.int16), "INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16), "FP32": np.dtype(np.float32), "FP64": np.dtype(np.float64),
    "BF16": np.dtype(ml_dtypes.bfloat16),
}
_BY_DTYPE = {dtype: datatype for datatype, dtype in _BY_DATATYPE.items()}
DATATYPES = tuple(_BY_DATATYPE)  # the datatypes xlacs serves


def to_numpy(datatype: str, what: str) -> np.dtype:
    """The numpy dtype of a request's `datatype`; InvalidRequest naming `what` ("input 'x'") if xlacs has none."""
    dtype = _BY_DATATYPE.get(datatype)
    if dtype is None:
        why = "xlacs serves numeric tensors only" if datatype == "BYTES" else "not a datatype of the protocol"
        raise InvalidRequest(f"{what} has datatype {datatype!r}: {why}; use one of {', '.join(DATATYPES)}")
    return dtype


def from_numpy(dtype: np.dtype) -> str:
    """The datatype of a dtype xlacs executes (complex ones have none in the protocol: ValueError)."""
    datatype = _BY_DTYPE.get(np.dtype(dtype))
    if datatype is None:
        raise ValueError(f"dtype {np.dtype(dtype)} has no Open Inference Protocol datatype")
    return datatype


def from_config(data_type: int) -> str:
    """The datatype of a config.pbtxt's data_type (TYPE_FP32 -> "FP32", TYPE_STRING -> "BYTES")."""
    name = model_config_pb2.DataType.Name(data_type).removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name


def to_config(datatype: str) -> int:
    """The config.pbtxt data_type of a datatype ("FP32" -> TYPE_FP32)."""
    return model_config_pb2.DataType.Value("TYPE_" + ("STRING" if datatype == "BYTES" else datatype))


def to_tf(datatype: str) -> int:
    """The TensorFlow DataType enum of a datatype, as a Compile's feeds name it."""
    return dtypes.from_numpy(to_numpy(datatype, "a tensor"))
