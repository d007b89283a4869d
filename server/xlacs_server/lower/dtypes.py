"""dtype groups that registrations name, as TF's kernel type constraints do."""
import ml_dtypes
import numpy as np

HALF = (np.float16, ml_dtypes.bfloat16)
FLOAT = HALF + (np.float32, np.float64)
COMPLEX = (np.complex64, np.complex128)
SIGNED = (np.int8, np.int16, np.int32, np.int64)
UNSIGNED = (np.uint8, np.uint16, np.uint32, np.uint64)
INT = SIGNED + UNSIGNED
REAL = FLOAT + INT
NUMERIC = REAL + COMPLEX
INDEX = (np.int32, np.int64)
ALL = NUMERIC + (np.bool_,)
