"""Tensors as the protocol's JSON carries them: "data" holds the elements in row-major order, nested as the shape
is or flattened (both are allowed by the spec). Values are checked, not coerced: an integer input given 1.5, or a
BOOL input given 2, is a mistake of the client's that a silent cast would hide."""
from __future__ import annotations

import math

import numpy as np

from xlacs_server.errors import InvalidRequest

# The kinds of the arrays numpy makes of JSON data that each kind of datatype takes: bools (JSON true and false) for
# BOOL only, integers for the integer datatypes (true and false count as 1 and 0), any number for the floating ones.
_TAKES = {"b": "b", "i": "biu", "u": "biu", "f": "biuf"}
_WHAT = {"b": "true or false", "i": "integers", "u": "integers", "f": "numbers"}


def elements(shape: list[int]) -> int:
    return math.prod(shape)


def decode(data, dtype: np.dtype, shape: list[int], what: str) -> np.ndarray:
    """The array of a request's "data" for a tensor of `dtype` and `shape`; InvalidRequest naming `what`
    ("input 'x'") if the elements do not fit."""
    if not isinstance(data, list):
        raise InvalidRequest(f"{what}: \"data\" must be a JSON array of the elements (row-major, flat or nested), "
                             f"not {type(data).__name__}")
    try:
        found = np.array(data)
    except ValueError:  # ragged nesting
        raise InvalidRequest(f"{what}: \"data\" is nested unevenly; give the elements flat or nested as the "
                             f"shape {shape}") from None
    if found.size != elements(shape):
        raise InvalidRequest(f"{what}: \"data\" has {found.size} elements, but shape {shape} takes "
                             f"{elements(shape)}")
    kind = dtype.kind if dtype.kind in _TAKES else "f"  # bfloat16's numpy kind is "V"
    if found.size and found.dtype.kind not in _TAKES[kind]:
        raise InvalidRequest(f"{what}: \"data\" holds {_described(found)}, but its datatype takes {_WHAT[kind]}")
    try:
        with np.errstate(over="raise", invalid="raise"):
            array = found.astype(dtype)
    except FloatingPointError:
        array = None
    if array is None or kind in "iu" and not np.array_equal(array, found):
        limits = f" ({np.iinfo(dtype).min} to {np.iinfo(dtype).max})" if kind in "iu" else ""
        raise InvalidRequest(f"{what}: \"data\" holds values out of its datatype's range{limits}")
    return array.reshape(shape)


def encode(array: np.ndarray) -> list:
    """The elements of `array`, flat in row-major order, as JSON values (fp16 and bf16 as JSON numbers)."""
    flat = array.reshape(-1)
    if flat.dtype.itemsize == 2 and flat.dtype.kind in "fV":  # fp16, bf16: Python floats via float32
        flat = flat.astype(np.float32)
    return flat.tolist()


def _described(found: np.ndarray) -> str:
    return {"b": "true/false", "i": "integers", "u": "integers", "f": "floating-point numbers (1.0 is one)",
            "U": "strings"}.get(found.dtype.kind, "values that are not all numbers (or integers past 64 bits)")
