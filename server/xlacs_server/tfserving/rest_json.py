"""TensorFlow Serving's REST JSON for :predict, as tensorflow_serving/util/json_tensor.cc reads and writes it: a body's
"instances" (row format) or "inputs" (columnar) decoded into arrays by the signature's input aliases, and the outputs
encoded as "predictions" or "outputs" to match. Messages are TF Serving's own, so that its clients see the errors they
know; the REST endpoint answers an InvalidJson with 400 and {"error": message}, as TF Serving does.

Where xlacs differs, it takes more than TF Serving and never less: float16, bfloat16 and uint16 tensors (TF Serving
has no JSON mapping for them), an integer out of its dtype's range refused (TF Serving wraps it around), and a
string output that is not UTF-8 written with U+FFFD for its bad bytes (TF Serving writes invalid JSON)."""
from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
import re
from collections.abc import Callable, Mapping

import ml_dtypes
import numpy as np

from xlacs_server.errors import InvalidRequest, LimitExceeded, Unimplemented
from xlacs_server.tensor_sig import TensorSig

ROW, COLUMNAR = "row", "columnar"  # the request's format, which the response's follows
STRING = np.dtype(object)  # DT_STRING: an object array of bytes, as xlacs holds it elsewhere (graph/tensor_proto.py)
DEBUG_CHARS = 256  # TF Serving's kMaxJsonDebugStringBytes: a JSON value quoted in a message is cut here

# DataTypeString of each dtype, as TF Serving's messages name them.
TF_NAMES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double", np.dtype(np.float16): "half",
            np.dtype(ml_dtypes.bfloat16): "bfloat16", np.dtype(np.int8): "int8", np.dtype(np.int16): "int16",
            np.dtype(np.int32): "int32", np.dtype(np.int64): "int64", np.dtype(np.uint8): "uint8",
            np.dtype(np.uint16): "uint16", np.dtype(np.uint32): "uint32", np.dtype(np.uint64): "uint64",
            np.dtype(np.bool_): "bool", STRING: "string", np.dtype(np.complex64): "complex64",
            np.dtype(np.complex128): "complex128"}
_FLOATS = {np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)}
# rapidjson's kParseNanAndInfFlag takes these spellings; Python's json only NaN, Infinity and -Infinity.
_NON_FINITE = re.compile(r'"(?:[^"\\]|\\.)*"|-?(?:Infinity|Inf|NaN)(?![A-Za-z0-9_])', re.DOTALL)
_SPELLED = {"Inf": "Infinity", "-Inf": "-Infinity", "-NaN": "NaN"}
_NON_FINITE_TEXT = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}  # printf's spelling -> TF Serving's
# Python's json messages as rapidjson's GetParseError_En words them.
_PARSE_ERRORS = {"Expecting value": "Invalid value.",
                 "Expecting property name enclosed in double quotes": "Missing a name for object member.",
                 "Expecting ':' delimiter": "Missing a colon after a name of object member.",
                 "Unterminated string starting at": "Missing a closing quotation mark in string.",
                 "Invalid control character at": "Invalid encoding in string.",
                 "Invalid \\escape": "Invalid escape character in string.",
                 "Invalid \\uXXXX escape": "Incorrect hex digit after \\u escape in string."}


class InvalidJson(InvalidRequest):
    """A :predict body (or the outputs for its answer) that TF Serving's JSON mapping refuses: INVALID_ARGUMENT,
    which the REST endpoint answers with HTTP 400 and {"error": message}."""


@dataclasses.dataclass(frozen=True)
class PredictRequest:
    signature_name: str  # "" when the body names none: the model's default signature
    format: str  # ROW or COLUMNAR: encode() answers in the same
    inputs: dict[str, np.ndarray]  # by the signature's input alias


def decode(body: bytes | str, inputs_of: Callable[[str], Mapping[str, TensorSig]], *,
           max_input_bytes: int | None = None) -> PredictRequest:
    """The :predict request of `body`. `inputs_of(signature_name)` gives the signature's inputs by alias (its
    errors, e.g. an unknown signature, pass through); only their dtypes are read here, since the served model
    checks shapes. Past `max_input_bytes` of arrays, LimitExceeded naming the setting."""
    raw = body.encode() if isinstance(body, str) else body
    doc = parse_json(raw)
    if not isinstance(doc, dict):
        raise InvalidJson(f"JSON Value: {_debug(doc)} Is not object")
    signature_name = doc.get("signature_name", "")
    if not isinstance(signature_name, str):
        raise InvalidJson(f"JSON Value: {_debug(doc)} not formatted correctly. 'signature_name' key must be a "
                          "string value.")
    specs = {alias: np.dtype(sig.dtype) for alias, sig in inputs_of(signature_name).items()}
    if not specs:
        raise InvalidJson(f"Failed to get input map for signature: {signature_name or 'DEFAULT'}")
    # An array of numbers holding a true or false reads as numbers in numpy; without either word anywhere in the
    # body, numpy's reading of numeric lists is exact and the element-by-element walk can be skipped.
    reader = _Reader(exact=b"true" not in raw and b"false" not in raw)
    if "instances" in doc:
        if "inputs" in doc:
            raise InvalidJson(f"JSON Value: {_debug(doc)} Not formatted correctly expecting only one of 'inputs' or "
                              "'instances' keys to exist ")
        instances = doc["instances"]
        if not isinstance(instances, list):
            raise InvalidJson(f"JSON Value: {_debug(doc)} Expecting 'instances' to be an list/array")
        if not instances:
            raise InvalidJson(f"JSON Value: {_debug(doc)} No values in 'instances' array")
        request = PredictRequest(signature_name, ROW, reader.rows(instances, specs))
    elif "inputs" in doc:
        request = PredictRequest(signature_name, COLUMNAR, reader.columns(doc["inputs"], specs))
    else:
        raise InvalidJson("Missing 'inputs' or 'instances' key")
    size = sum(a.nbytes for a in request.inputs.values())
    if max_input_bytes is not None and size > max_input_bytes:
        raise LimitExceeded(f"the request's inputs have {size} bytes", "max_input_bytes", max_input_bytes)
    return request


def encode(outputs: Mapping[str, np.ndarray], format: str) -> bytes:
    """The JSON body answering a request of `format`: {"predictions": ...} for ROW, one entry per example (the
    value itself for one output, an object of the outputs for several); {"outputs": ...} for COLUMNAR (the tensor
    itself for one output, an object for several). An output whose alias ends in "_bytes" is DT_STRING written as
    {"b64": ...}."""
    if not outputs:
        raise InvalidJson("Cannot convert empty tensor map to JSON")
    if format == COLUMNAR:
        texts = {name: _nest(_elements(array, name), array.shape)[0] for name, array in outputs.items()}
        if len(texts) == 1:
            return ('{"outputs": ' + next(iter(texts.values())) + "}").encode()
        return ('{"outputs": {' + ", ".join(f"{json.dumps(n)}: {t}" for n, t in texts.items()) + "}}").encode()
    if format != ROW:
        raise InvalidJson("Invalid request format")
    batch = None
    for name, array in outputs.items():
        if array.ndim == 0:
            raise InvalidJson(f"Tensor name: {name} has no shape information ")
        if batch is not None and array.shape[0] != batch:
            raise InvalidJson(f"Tensor name: {name} has inconsistent batch size: {array.shape[0]} expecting: {batch}")
        batch = array.shape[0]
    rows = {name: _nest(_elements(array, name), array.shape[1:], array.shape[0]) for name, array in outputs.items()}
    if len(rows) == 1:
        examples = next(iter(rows.values()))
    else:
        keys = {name: json.dumps(name) for name in rows}
        examples = ["{" + ", ".join(f"{keys[n]}: {r[i]}" for n, r in rows.items()) + "}" for i in range(batch)]
    return ('{"predictions": [' + ", ".join(examples) + "]}").encode()


# --- Decoding ------------------------------------------------------------------------------------------------------

def parse_json(raw: bytes):
    """The body's JSON value as rapidjson reads it for TF Serving: NaN and Inf(inity) taken, what follows the value
    ignored, bytes that are not UTF-8 kept (a DT_STRING input gets them back)."""
    text = raw.decode("utf-8", "surrogateescape")
    start = len(text) - len(text.lstrip(" \t\n\r"))
    if not raw or start == len(text):
        raise InvalidJson("JSON Parse error: The document is empty" + ("" if not raw else f". at offset: {start}"))
    decoder = json.JSONDecoder()
    try:
        return decoder.raw_decode(text, start)[0]
    except json.JSONDecodeError as first:
        error = first
    except RecursionError:
        raise InvalidJson("JSON Parse error: the document nests deeper than xlacs reads") from None
    spelled = _NON_FINITE.sub(lambda m: _SPELLED.get(m.group(), m.group()), text)
    if spelled != text:
        try:
            return decoder.raw_decode(spelled, start)[0]
        except (json.JSONDecodeError, RecursionError):
            pass
    what = next((ours for theirs, ours in _PARSE_ERRORS.items() if error.msg.startswith(theirs)), error.msg)
    if error.msg == "Expecting ',' delimiter":
        what = ("Missing a comma or '}' after an object member." if _innermost(text, error.pos) == "{" else
                "Missing a comma or ']' after an array element.")
    raise InvalidJson(f"JSON Parse error: {what} at offset: {len(text[:error.pos].encode('utf-8', 'surrogateescape'))}")


def _innermost(text: str, end: int) -> str:
    """The bracket of the innermost array or object open at `end` (for a parse error's message)."""
    opened = []
    for match in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text[:end]):
        bracket = match.group()
        if bracket in "[{":
            opened.append(bracket)
        elif bracket in "]}" and opened:
            opened.pop()
    return opened[-1] if opened else ""


def is_b64(value) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str)


def _is_named(value) -> bool:
    """An object of named inputs: any JSON object but a {"b64": ...} one."""
    return isinstance(value, dict) and not is_b64(value)


def _shape(value) -> tuple[int, ...]:
    """GetDenseTensorShape: the sizes of the first list at each level."""
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return tuple(shape)


class _Reader:
    def __init__(self, exact: bool):
        self.exact = exact

    def columns(self, value, specs: dict[str, np.dtype]) -> dict[str, np.ndarray]:
        """FillTensorMapFromInputsMap: one tensor as a value, or an object naming each input (others ignored, as
        TF Serving ignores them)."""
        if not _is_named(value):
            if len(specs) > 1:
                raise InvalidJson("inputs is a plain value/list, but expecting an object as multiple input tensors "
                                  "required as per tensorinfo_map")
            (name, dtype), = specs.items()
            return {name: self.tensor(value, dtype)}
        tensors = {}
        for name, dtype in specs.items():
            if name not in value:
                raise InvalidJson(f"Missing named input: {name} in 'inputs' object.")
            tensors[name] = self.tensor(value[name], dtype)
        return tensors

    def rows(self, instances: list, specs: dict[str, np.dtype]) -> dict[str, np.ndarray]:
        """FillTensorMapFromInstancesList: a list of values (one input), or of objects naming every input; each
        input's instances stacked on a new 0-th dim."""
        if not isinstance(instances[0], dict) and len(specs) > 1:
            raise InvalidJson("instances is a plain list, but expecting list of objects as multiple input tensors "
                              "required as per tensorinfo_map")
        if _is_named(instances[0]):
            if all(_is_named(i) and i.keys() == specs.keys() for i in instances):
                stacked = {name: self.stacked([i[name] for i in instances], dtype) for name, dtype in specs.items()}
                if all(a is not None for a in stacked.values()):
                    return stacked
            return self.rows_one_by_one(instances, specs, named=True)
        name, dtype = next(iter(specs.items()))
        if not any(_is_named(i) for i in instances):
            array = self.stacked(instances, dtype)
            if array is not None:
                return {name: array}
        return self.rows_one_by_one(instances, specs, named=False)

    def stacked(self, column: list, dtype: np.dtype) -> np.ndarray | None:
        """The instances of one input as one array, if numpy reads them as TF Serving would; else None."""
        return self.numeric(column, dtype, (len(column), *_shape(column[0])))

    def rows_one_by_one(self, instances: list, specs: dict[str, np.dtype], named: bool) -> dict[str, np.ndarray]:
        """The instances one at a time, as TF Serving reads them: its first error, in its words."""
        parts: dict[str, list[np.ndarray]] = {}
        for index, instance in enumerate(instances):
            if named != _is_named(instance):
                raise InvalidJson(f"Expecting object but got list at item {index} of input list" if named else
                                  f"Expecting value/list but got object at item {index} of input list")
            items = instance.items() if named else [(next(iter(specs)), instance)]
            for name, value in items:
                where = f"Failed to process element: {index} {f'key: {name} ' if named else ''}of 'instances' list"
                try:
                    if name not in specs:
                        raise InvalidJson(f"JSON object: does not have named input: {name}")
                    array = self.tensor(value, specs[name])
                    if name in parts:
                        first = parts[name][0]
                        if first.size != array.size:
                            raise InvalidJson(f"Expecting tensor size: {first.size} but got: {array.size}")
                        if first.shape != array.shape:
                            raise InvalidJson(f"Expecting shape {_dims(first.shape)} but got: {_dims(array.shape)}")
                except InvalidJson as e:
                    raise InvalidJson(f"{where}. Error: INVALID_ARGUMENT: {e}") from None
                except Unimplemented as e:
                    raise InvalidJson(f"{where}. Error: UNIMPLEMENTED: {e}") from None
                parts.setdefault(name, []).append(array)
            if named and instance.keys() != specs.keys():
                raise InvalidJson(f"Failed to process element: {index} of 'instances' list. JSON object: "
                                  f"{_debug(instance)} keys must be equal to: {','.join(sorted(specs))}")
        return {name: np.stack(arrays) for name, arrays in parts.items()}

    def tensor(self, value, dtype: np.dtype) -> np.ndarray:
        """FillTensorProto: `value` as a dense tensor, its shape that of its first elements."""
        shape = _shape(value)
        array = self.numeric(value, dtype, shape) if shape else None
        return array if array is not None else _walked(value, dtype, shape)

    def numeric(self, value: list, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray | None:
        """The fast path: numpy's array of a nested list of numbers (or booleans), when it is what the walk would
        make of it; None to walk it instead (strings, b64 objects, a mistake to report in TF Serving's words)."""
        if dtype == STRING or dtype.kind == "c" or not self.exact and dtype.kind != "b":
            return None
        try:
            found = np.array(value)
        except (ValueError, TypeError, OverflowError):  # ragged, or an integer past 64 bits
            return None
        if found.shape != shape:
            return None
        if found.size == 0:
            return np.zeros(shape, dtype)
        kind = found.dtype.kind
        if dtype.kind == "b":
            return found if kind == "b" else None
        if dtype in _FLOATS:
            if kind not in "iuf":
                return None
            with np.errstate(over="ignore"):  # past float32's range: inf, as TF Serving's GetFloat gives
                return found.astype(dtype)
        if kind not in "iu":
            return None
        limits = np.iinfo(dtype)
        if found.min() < limits.min or found.max() > limits.max:
            return None
        return found.astype(dtype)


def _walked(value, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """The walk of FillTensorProto: every list of the size its level's first list has, every value at the last
    level and of the dtype, in TF Serving's order and words."""
    rank, flat = len(shape), []
    take = _taker(dtype)

    def fill(node, level: int) -> None:
        if not isinstance(node, list):
            if level != rank:
                raise InvalidJson(f"JSON Value: {_debug(node)} found at incorrect level: {level + 1} in the JSON "
                                  f"DOM. Expected at level: {rank}")
            flat.append(take(node))
            return
        if level >= rank:
            raise InvalidJson(f"Encountered list at unexpected level: {level} expected < {rank}")
        if len(node) != shape[level]:
            raise InvalidJson(f"Encountered list at unexpected size: {len(node)} at level: {level} expected size: "
                              f"{shape[level]}")
        for item in node:
            fill(item, level + 1)

    fill(value, 0)
    if dtype == STRING:
        array = np.empty(len(flat), STRING)
        array[:] = flat
        return array.reshape(shape)
    with np.errstate(over="ignore"):
        return np.array(flat, dtype=dtype).reshape(shape)


def _taker(dtype: np.dtype) -> Callable:
    """AddValueToTensor for one dtype: the element as Python holds it, or TF Serving's type error."""
    name = TF_NAMES.get(dtype, str(dtype))

    def refuse(value):
        if dtype.kind == "c" or dtype not in TF_NAMES:
            raise Unimplemented(f"Conversion of JSON Value: {_debug(value)} to type: {name}")
        raise InvalidJson(f"JSON Value: {_debug(value)} Type: {_json_type(value)} is not of expected type: {name}")

    if dtype == STRING:
        def take(value):
            if isinstance(value, str):
                return value.encode("utf-8", "surrogateescape")
            if isinstance(value, dict):
                return b64_decoded(value)
            refuse(value)
    elif dtype.kind == "b":
        def take(value):
            if isinstance(value, bool):
                return value
            refuse(value)
    elif dtype in _FLOATS:
        def take(value):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                try:
                    return float(value)
                except OverflowError:  # an integer past double's range
                    return math.copysign(math.inf, value)
            refuse(value)
    elif dtype.kind in "iu":
        low, high = int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)

        def take(value):
            if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
                return value
            refuse(value)
    else:
        take = refuse
    return take


def b64_decoded(value) -> bytes:
    """JsonDecodeBase64Object: {"b64": "<standard base64, padding optional>"}."""
    if not is_b64(value):
        raise InvalidJson(f"JSON Value: {_debug(value)} not formatted correctly for base64 data")
    text = value["b64"]
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidJson("Unable to base64 decode") from None


def _json_type(value) -> str:
    """JsonTypeString: rapidjson's name of the value's type."""
    if value is None:
        return "Null"
    if isinstance(value, bool):
        return "True" if value else "False"
    return {dict: "Object", list: "Array", str: "String"}.get(type(value), "Number")


def _dims(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


def _debug(value) -> str:
    """JsonValueToDebugString: the value as JSON, cut at DEBUG_CHARS (a huge body is never rendered whole; TF
    Serving cuts between values only, so one long string would make its message as long)."""
    out: list[str] = []
    size = 0

    def write(text: str) -> bool:
        nonlocal size
        if size >= DEBUG_CHARS:
            return False
        out.append(text[:DEBUG_CHARS - size])
        size += len(text)
        return True

    def render(node) -> bool:
        if isinstance(node, list):
            if not write("["):
                return False
            for i, item in enumerate(node):
                if i and not write(", ") or not render(item):
                    return False
            return write("]")
        if isinstance(node, dict):
            if not write("{"):
                return False
            for i, (key, item) in enumerate(node.items()):
                if i and not write(", ") or not write(json.dumps(key) + ": ") or not render(item):
                    return False
            return write("}")
        return write(json.dumps(node))

    render(value)
    return "".join(out)


# --- Encoding ------------------------------------------------------------------------------------------------------

def _elements(array: np.ndarray, name: str) -> list[str]:
    """Each element of `array`, flat in row-major order, as TF Serving writes it (AddSingleValueAndAdvance)."""
    flat = array.reshape(-1)
    dtype = flat.dtype
    if dtype == np.float64:
        return _decimals(flat, 17)
    if dtype in _FLOATS:  # float32; half and bfloat16 (which TF Serving cannot write) as float32
        return _decimals(flat.astype(np.float32), 9)
    if dtype.kind in "iu":
        return [str(v) for v in flat.tolist()]
    if dtype.kind == "b":
        return ["true" if v else "false" for v in flat.tolist()]
    if dtype == STRING:
        if name.endswith("_bytes"):
            return ['{"b64": "' + base64.b64encode(_bytes(v)).decode() + '"}' for v in flat.tolist()]
        return [json.dumps(_bytes(v).decode("utf-8", "replace")) for v in flat.tolist()]
    raise InvalidJson(f"Failed to write JSON value for tensor type: {TF_NAMES.get(dtype, str(dtype))}")


def _bytes(value) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def _decimals(flat: np.ndarray, max_digits10: int) -> list[str]:
    """WriteDecimal: printf's %g (six significant digits) when it reads back as the same value, else
    max_digits10 of them (9 for float, 17 for double); a whole number gets ".0" (9e+06 keeps its exponent);
    NaN, Infinity and -Infinity as JavaScript spells them."""
    wide = flat.astype(np.float64).tolist()
    texts = ["%g" % v for v in wide]
    with np.errstate(over="ignore"):
        back = np.array(list(map(float, texts))).astype(flat.dtype)
    full = f"%.{max_digits10}g"
    redo = (back != flat).tolist()  # NaN too: spelled below either way
    texts = [full % v if again else t for t, v, again in zip(texts, wide, redo)]
    return [t if "." in t or "e" in t else _NON_FINITE_TEXT.get(t) or t + ".0" for t in texts]


def _nest(items: list[str], dims: tuple[int, ...], outer: int = 1) -> list[str]:
    """The flat elements as nested JSON arrays of `dims`, `outer` of them (the examples of a row format answer):
    each level joined once, so that writing is linear in the elements."""
    for level in range(len(dims) - 1, -1, -1):
        n = dims[level]
        groups = outer * math.prod(dims[:level])
        items = ["[" + ", ".join(items[g * n:(g + 1) * n]) + "]" for g in range(groups)]
    return items
