"""TF Serving's REST JSON for :predict (server/xlacs_server/tfserving/rest_json.py) against what TF Serving does: the
examples of its REST documentation (tensorflow.org/tfx/serving/api_rest) verbatim, the cases of its own
tensorflow_serving/util/json_tensor_test.cc, its error messages word for word, and round trips."""
from __future__ import annotations

import json
import math

import hypothesis.extra.numpy as hnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlacs_server.errors import InvalidRequest, LimitExceeded, Unimplemented
from xlacs_server.inference.status import HTTP_STATUS
from xlacs_server.tensor_sig import TensorSig
from xlacs_server.tfserving import rest_json
from xlacs_server.tfserving.rest_json import COLUMNAR, ROW, STRING, InvalidJson

F32, F64, I32, I64, U8, BOOL = (np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_))


def signature(**dtypes) -> dict[str, TensorSig]:
    """A signature's inputs by alias, their shapes unknown."""
    return {alias: TensorSig(f"{alias}:0", np.dtype(dtype), (-1,)) for alias, dtype in dtypes.items()}


def decode(body, **dtypes):
    return rest_json.decode(body, lambda name: signature(**dtypes))


def refused(body, **dtypes) -> str:
    with pytest.raises(InvalidJson) as raised:
        decode(body, **dtypes)
    return str(raised.value)


def same(got: np.ndarray, want) -> None:
    want = np.asarray(want, dtype=got.dtype)
    assert got.shape == want.shape
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(got.view(f"u{got.dtype.itemsize}"), want.view(f"u{got.dtype.itemsize}"))
    else:
        np.testing.assert_array_equal(got, want)


# --- The REST documentation's examples, verbatim ---------------------------------------------------------------------

def test_the_documented_row_format_with_one_input():
    # The documentation's examples carry // comments, which no JSON parser takes; their JSON, as written:
    request = decode('{\n  "instances": [ "foo", "bar", "baz" ]\n}', x=STRING)
    assert request.format == ROW and request.signature_name == ""
    assert request.inputs["x"].tolist() == [b"foo", b"bar", b"baz"]
    same(decode('{"instances": [ [[1, 2]], [[3, 4]] ]}', x=F32).inputs["x"], [[[1, 2]], [[3, 4]]])


DOCUMENTED_INSTANCES = """{
 "instances": [
   {
     "tag": "foo",
     "signal": [1, 2, 3, 4, 5],
     "sensor": [[1, 2], [3, 4]]
   },
   {
     "tag": "bar",
     "signal": [3, 4, 1, 2, 5]],
     "sensor": [[4, 5], [6, 8]]
   }
 ]
}"""
DOCUMENTED_INPUTS = """{
 "inputs": {
   "tag": ["foo", "bar"],
   "signal": [[1, 2, 3, 4, 5], [3, 4, 1, 2, 5]],
   "sensor": [[[1, 2], [3, 4]], [[4, 5], [6, 8]]]
 }
}"""


def test_the_documented_named_inputs_in_both_formats_decode_alike():
    # The documentation's row example has a stray "]" after the second "signal": TF Serving's parser refuses it too.
    offset = DOCUMENTED_INSTANCES.index("5]],") + 2
    assert refused(DOCUMENTED_INSTANCES, tag=STRING, signal=I32, sensor=I32) == \
        f"JSON Parse error: Missing a comma or '}}' after an object member. at offset: {offset}"
    assert refused('{"instances": [1 2]}', x=I32) == \
        "JSON Parse error: Missing a comma or ']' after an array element. at offset: 17"
    rows = decode(DOCUMENTED_INSTANCES.replace("5]],", "5],"), tag=STRING, signal=I32, sensor=I32)
    columns = decode(DOCUMENTED_INPUTS, tag=STRING, signal=I32, sensor=I32)
    assert (rows.format, columns.format) == (ROW, COLUMNAR)
    for name in ("tag", "signal", "sensor"):
        same(rows.inputs[name], columns.inputs[name])
    assert columns.inputs["tag"].tolist() == [b"foo", b"bar"]
    same(columns.inputs["sensor"], [[[1, 2], [3, 4]], [[4, 5], [6, 8]]])


def test_the_documented_half_plus_three_predict_answers_as_tf_serving_does():
    request = decode('{"instances": [1.0,2.0,5.0]}', x=F32)
    same(request.inputs["x"], [1, 2, 5])
    body = rest_json.encode({"y": request.inputs["x"] * 0.5 + 3}, request.format)
    assert json.loads(body) == {"predictions": [3.5, 4.0, 5.5]}
    assert body == b'{"predictions": [3.5, 4.0, 5.5]}'


def test_the_documented_b64_object_is_the_bytes_it_encodes():
    request = decode('{"instances": [{ "b64": "aW1hZ2UgYnl0ZXM=" }, { "b64": "YXdlc29tZSBpbWFnZSBieXRlcw==" }]}',
                     image=STRING)
    assert request.inputs["image"].tolist() == [b"image bytes", b"awesome image bytes"]


def test_the_documented_non_finite_tokens():
    # The documentation writes "Nan"; rapidjson (TF Serving's parser) and Python take NaN only.
    assert refused('{"instances": [ 1.0, -3.14, Nan, Infinity ]}', x=F32).startswith("JSON Parse error: Invalid value.")
    same(decode('{"instances": [ 1.0, -3.14, NaN, Infinity ]}', x=F32).inputs["x"],
         np.array([1.0, -3.14, np.nan, np.inf], np.float32))


# --- json_tensor_test.cc's requests --------------------------------------------------------------------------------

def test_single_unnamed_tensor_and_signature_name():
    request = decode('{"signature_name": "predict_images", "instances": [[1,2],[3,4],[5,6]]}', default=I32)
    assert (request.signature_name, request.format) == ("predict_images", ROW)
    same(request.inputs["default"], [[1, 2], [3, 4], [5, 6]])


def test_the_signature_is_looked_up_by_the_name_the_body_gives():
    asked = []
    rest_json.decode(b'{"signature_name": "s2", "inputs": [1]}', lambda name: asked.append(name) or signature(x=I32))
    rest_json.decode(b'{"inputs": [1]}', lambda name: asked.append(name) or signature(x=I32))
    assert asked == ["s2", ""]
    with pytest.raises(InvalidJson, match="^Failed to get input map for signature: DEFAULT$"):
        rest_json.decode(b'{"inputs": [1]}', lambda name: {})


@pytest.mark.parametrize("dtype", [F32, F64])
def test_integers_are_taken_where_the_signature_says_float(dtype):
    same(decode('{"instances": [1, 2.0, 3, 4, 5.003, 0.007, 0.0]}', x=dtype).inputs["x"],
         np.array([1, 2, 3, 4, 5.003, 0.007, 0], dtype))
    same(decode('{"instances": [1435774380]}', x=dtype).inputs["x"], decode('{"instances": [1435774380.0]}',
                                                                          x=dtype).inputs["x"])


def test_floats_past_float32_are_infinite_and_below_it_zero():
    big, tiny = float(np.finfo(np.float64).max), float(np.finfo(np.float64).tiny)
    same(decode(f'{{"instances": [{big!r}, {-big!r}, {tiny!r}, {-tiny!r}]}}', x=F32).inputs["x"],
         np.array([np.inf, -np.inf, 0.0, -0.0], np.float32))


def test_what_follows_the_json_value_is_ignored():
    same(decode('{"instances": [[1,2],[3,4],[5,6]]}X', x=I32).inputs["x"], [[1, 2], [3, 4], [5, 6]])


def test_b64_scalars_lists_and_named():
    assert decode('{"instances": [ { "b64" : "aGVsbG8=" }, { "b64": "d29ybGQ=" } ]}',
                  default=STRING).inputs["default"].tolist() == [b"hello", b"world"]
    lists = decode('{"instances": [ [{ "b64" : "aGVsbG8=" }], [{ "b64": "d29ybGQ=" }] ]}', default=STRING)
    assert lists.inputs["default"].tolist() == [[b"hello"], [b"world"]]
    named = decode('{"instances": [{"default": [ [{ "b64" : "aGVsbG8=" }], [{ "b64": "d29ybGQ=" }] ]}]}',
                   default=STRING)
    assert named.inputs["default"].shape == (1, 2, 1)
    assert decode('{"inputs": {"b64": "aGVsbG8"}}', x=STRING).inputs["x"].tolist() == b"hello"  # padding optional


def test_multiple_named_tensors_in_rows():
    request = decode("""{"instances": [
        {"int_tensor": [[1,2],[3,4],[5,6]], "str_tensor": ["foo", "bar"], "float_tensor": [1.0, NaN],
         "dbl_tensor": [NaN]},
        {"int_tensor": [[7,8],[9,0],[1,2]], "str_tensor": ["baz", "bat"], "float_tensor": [2.0, Infinity],
         "dbl_tensor": [2.0]}]}""", int_tensor=I32, str_tensor=STRING, float_tensor=F32, dbl_tensor=F64)
    inputs = request.inputs
    same(inputs["int_tensor"], [[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 0], [1, 2]]])
    assert inputs["str_tensor"].tolist() == [[b"foo", b"bar"], [b"baz", b"bat"]]
    same(inputs["float_tensor"], np.array([[1, np.nan], [2, np.inf]], np.float32))
    same(inputs["dbl_tensor"], np.array([[np.nan], [2]]))


def test_columnar_single_and_named():
    for body in ('{"inputs": {"int_tensor": [[[1,2],[3,4],[5,6]]]}}', '{"inputs": [[[1,2],[3,4],[5,6]]]}'):
        request = decode(body, int_tensor=I32)
        assert request.format == COLUMNAR
        same(request.inputs["int_tensor"], [[[1, 2], [3, 4], [5, 6]]])
    request = decode('{"inputs": {"int_tensor": [[[1,2],[3,4],[5,6]]], "str_tensor": ["foo", "bar"], '
                     '"bin_tensor": { "b64" : "aGVsbG8=" }}}', int_tensor=I32, str_tensor=STRING, bin_tensor=STRING)
    assert request.inputs["bin_tensor"].shape == () and request.inputs["bin_tensor"].item() == b"hello"
    assert request.inputs["str_tensor"].tolist() == [b"foo", b"bar"]


def test_columnar_inputs_need_not_share_the_0th_dim():
    request = decode('{"inputs": {"a": [1, 2, 3], "b": [[1.5]], "c": 7}}', a=I64, b=F32, c=I32)
    assert [request.inputs[n].shape for n in "abc"] == [(3,), (1, 1), ()]


def test_booleans_and_every_integer_dtype():
    same(decode('{"instances": [[true, false], [false, true]]}', x=BOOL).inputs["x"], [[1, 0], [0, 1]])
    for dtype in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        limits = np.iinfo(dtype)
        same(decode(f'{{"inputs": [{limits.min}, 0, {limits.max}]}}', x=dtype).inputs["x"],
             np.array([limits.min, 0, limits.max], dtype))


def test_infinity_and_nan_as_rapidjson_spells_them():
    same(decode('{"inputs": [NaN, -NaN, Inf, -Inf, Infinity, -Infinity], "note": "NaN Inf"}', x=F64).inputs["x"],
         np.array([np.nan, np.nan, np.inf, -np.inf, np.inf, -np.inf]))
    assert decode('{"inputs": ["Inf", "-NaN"]}', x=STRING).inputs["x"].tolist() == [b"Inf", b"-NaN"]


# --- Errors, in TF Serving's words ---------------------------------------------------------------------------------

@pytest.mark.parametrize("body, message", [
    ("", "JSON Parse error: The document is empty"),
    ("  ", "JSON Parse error: The document is empty. at offset: 2"),
    ("instances = [1, 2]", "JSON Parse error: Invalid value. at offset: 0"),
    ('{"instances": [1, 2}', "JSON Parse error: "),
    ("[1, 2]", "JSON Value: [1, 2] Is not object"),
    ('{"signature_name": 5, "instances": [[1,2],[3,4],[5,6,7]]}', "'signature_name' key must be a string value."),
    ('{"instances": [[1,2],[3,4],[5,6,7]], "inputs": [[1,2],[3,4],[5,6,7]]}',
     "Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist "),
    ('{"instances": 5}', "JSON Value: {\"instances\": 5} Expecting 'instances' to be an list/array"),
    ('{"instances": []}', "JSON Value: {\"instances\": []} No values in 'instances' array"),
    ('{"signature_name": "s"}', "Missing 'inputs' or 'instances' key"),
])
def test_malformed_bodies(body, message):
    got = refused(body, x=I32)
    assert got.startswith(message) if message.startswith("JSON Parse") else message in got, got


@pytest.mark.parametrize("body, message", [
    ('{"instances": [[1,2],[3,4],[5,6,7]]}',
     "Failed to process element: 2 of 'instances' list. Error: INVALID_ARGUMENT: Expecting tensor size: 2 but got: 3"),
    ('{"instances": [[1,2],[3,4],[[5,6]]]}',
     "Failed to process element: 2 of 'instances' list. Error: INVALID_ARGUMENT: Expecting shape [2] but got: [1,2]"),
    ('{"instances": [1, [1]]}',
     "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: Expecting shape [] but got: [1]"),
    ('{"instances": [[1,2],["a", "b"]]}', "Failed to process element: 1 of 'instances' list. Error: "
     "INVALID_ARGUMENT: JSON Value: \"a\" Type: String is not of expected type: int32"),
    ('{"instances": [1.0]}', "JSON Value: 1.0 Type: Number is not of expected type: int32"),
    ('{"instances": [true]}', "JSON Value: true Type: True is not of expected type: int32"),
    ('{"instances": [null]}', "JSON Value: null Type: Null is not of expected type: int32"),
    ('{"instances": [2147483648]}', "JSON Value: 2147483648 Type: Number is not of expected type: int32"),
    ('{"instances": [{"b64": "AA=="}]}', 'JSON Value: {"b64": "AA=="} Type: Object is not of expected type: int32'),
    ('{"inputs": [[1, 2], [3]]}', "Encountered list at unexpected size: 1 at level: 1 expected size: 2"),
    ('{"inputs": [[1, 2], 3]}', "JSON Value: 3 found at incorrect level: 2 in the JSON DOM. Expected at level: 2"),
    ('{"inputs": [1, [2]]}', "Encountered list at unexpected level: 1 expected < 1"),
    ('{"inputs": [1.5]}', "JSON Value: 1.5 Type: Number is not of expected type: int32"),
])
def test_wrong_values_for_an_int32_input(body, message):
    got = refused(body, x=I32)
    assert got == message or got.endswith(message), got


@pytest.mark.parametrize("dtype, body, message", [
    (F32, '{"instances": ["x", "y"]}', "not of expected type: float"),
    (F32, '{"inputs": [1.0, false]}', "JSON Value: false Type: False is not of expected type: float"),
    (F64, '{"inputs": [[1.0], [true]]}', "JSON Value: true Type: True is not of expected type: double"),
    (BOOL, '{"inputs": [true, 1]}', "JSON Value: 1 Type: Number is not of expected type: bool"),
    (U8, '{"inputs": [255, 256]}', "JSON Value: 256 Type: Number is not of expected type: uint8"),
    (U8, '{"inputs": [-1]}', "JSON Value: -1 Type: Number is not of expected type: uint8"),
    (STRING, '{"inputs": [1]}', "JSON Value: 1 Type: Number is not of expected type: string"),
    (STRING, '{"inputs": [{"b64": "AA==", "x": 1}]}', 'not formatted correctly for base64 data'),
    (STRING, '{"inputs": [{"b64": "!!!"}]}', "Unable to base64 decode"),
])
def test_wrong_values_for_other_dtypes(dtype, body, message):
    assert message in refused(body, x=dtype)


def test_an_unsupported_dtype_is_unimplemented_as_tf_serving_says():
    with pytest.raises(Unimplemented, match=r"^Conversion of JSON Value: 1 to type: complex64$"):
        decode('{"inputs": [1]}', x=np.complex64)
    assert refused('{"instances": [1]}', x=np.complex64) == ("Failed to process element: 0 of 'instances' list. "
                                                             "Error: UNIMPLEMENTED: Conversion of JSON Value: 1 to "
                                                             "type: complex64")


def test_named_inputs_unknown_missing_and_mixed():
    assert refused('{"instances": [{"a": 1, "c": 2}]}', a=I32, b=I32) == (
        "Failed to process element: 0 key: c of 'instances' list. Error: INVALID_ARGUMENT: JSON object: does not "
        "have named input: c")
    assert refused('{"instances": [{"a": 1}]}', a=I32, b=I32) == (
        "Failed to process element: 0 of 'instances' list. JSON object: {\"a\": 1} keys must be equal to: a,b")
    assert refused('{"instances": [1, 2]}', a=I32, b=I32) == (
        "instances is a plain list, but expecting list of objects as multiple input tensors required as per "
        "tensorinfo_map")
    assert refused('{"instances": [{"a": [1], "b": 1}, [1, 20, 30]]}', a=I32, b=I32) == (
        "Expecting object but got list at item 1 of input list")
    assert refused('{"instances": [["baz", "bar"], {"a": ["baz", "bat"]}]}', a=STRING) == (
        "Expecting value/list but got object at item 1 of input list")
    assert refused('{"instances": [{"a": [[1,2],[3,4],[5,6]], "b": "x"}, {"a": [[[7,8],[9,0],[1,2]]], "b": "y"}]}',
                   a=I32, b=STRING).endswith("key: a of 'instances' list. Error: INVALID_ARGUMENT: Expecting shape "
                                             "[3,2] but got: [1,3,2]")
    assert refused('{"inputs": {"a": 1}}', a=I32, b=I32) == "Missing named input: b in 'inputs' object."
    assert refused('{"inputs": [1, 2]}', a=I32, b=I32) == (
        "inputs is a plain value/list, but expecting an object as multiple input tensors required as per "
        "tensorinfo_map")


def test_columnar_inputs_the_signature_lacks_are_ignored_as_tf_serving_ignores_them():
    assert list(decode('{"inputs": {"a": 1, "typo": 2}}', a=I32).inputs) == ["a"]


def test_a_quoted_value_is_cut_as_tf_serving_cuts_it():
    message = refused('{"instances": 5, "pad": "' + "x" * 1000 + '"}', x=I32)
    assert message.startswith('JSON Value: {"instances": 5, "pad": "xxx') and len(message) < 400


def test_the_error_is_invalid_argument_which_the_endpoints_answer_400():
    with pytest.raises(InvalidRequest) as raised:
        decode('{"instances": ["x"]}', x=F32)
    assert HTTP_STATUS[raised.value.code] == 400


def test_decoded_inputs_past_max_input_bytes_are_refused_naming_the_setting():
    body = '{"inputs": [' + ", ".join(["0"] * 1000) + "]}"
    assert rest_json.decode(body, lambda _: signature(x=I64), max_input_bytes=8000).inputs["x"].nbytes == 8000
    with pytest.raises(LimitExceeded, match="max_input_bytes"):
        rest_json.decode(body, lambda _: signature(x=I64), max_input_bytes=7999)


def test_bodies_that_are_not_utf8_keep_their_bytes_for_string_inputs():
    assert decode(b'{"inputs": ["\xff\xfe"]}', x=STRING).inputs["x"].tolist() == [b"\xff\xfe"]


# --- Large bodies --------------------------------------------------------------------------------------------------

def test_a_large_numeric_body_is_read_by_numpy_not_element_by_element(monkeypatch):
    def walked(*args):
        raise AssertionError("walked element by element")

    monkeypatch.setattr(rest_json, "_walked", walked)
    rows = np.arange(200_000, dtype=np.float32).reshape(-1, 4) / 7
    body = json.dumps({"instances": rows.tolist()})
    same(decode(body, x=F32).inputs["x"], rows.astype(np.float64).astype(np.float32))
    named = json.dumps({"instances": [{"a": r, "b": int(i)} for i, r in enumerate(rows[:1000].tolist())]})
    assert decode(named, a=F32, b=I64).inputs["b"].shape == (1000,)
    same(decode(json.dumps({"inputs": {"a": rows.tolist(), "b": [1]}}), a=F64, b=I32).inputs["a"], rows.astype(F64))


def test_a_body_with_booleans_is_walked_and_still_exact():
    # numpy reads [true, 2] as [1, 2]: a body holding "true" or "false" anywhere is checked element by element.
    assert "True" in refused('{"inputs": [2, true]}', x=I32)
    assert "True" in refused('{"inputs": [2.5, true]}', x=F32)
    same(decode('{"inputs": [1, 2], "true": 1}', x=I32).inputs["x"], [1, 2])


NESTED = st.recursive(st.one_of(st.integers(-2**40, 2**40), st.floats(allow_nan=False, allow_infinity=False)),
                      lambda inner: st.lists(inner, max_size=3), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(value=NESTED, dtype=st.sampled_from([F32, F64, I32, I64, U8, BOOL]))
def test_the_fast_path_agrees_with_the_walk(value, dtype):
    """numpy's reading, where it is taken, is what TF Serving's walk makes of the value."""
    shape = rest_json._shape(value)
    fast = rest_json._Reader(exact=True).numeric(value, dtype, shape) if shape else None
    try:
        walked = rest_json._walked(value, dtype, shape)
    except InvalidJson:
        assert fast is None
        return
    if fast is not None:
        assert fast.dtype == walked.dtype
        same(fast, walked)


def outcome(body: str, dtype):
    try:
        return decode(body, x=dtype).inputs["x"]
    except InvalidJson as e:
        return str(e)


@settings(max_examples=300, deadline=None)
@given(instances=st.lists(NESTED, min_size=1, max_size=4), dtype=st.sampled_from([F32, F64, I32, I64, U8]),
       key=st.sampled_from(["instances", "inputs"]))
def test_a_body_decodes_alike_whether_numpy_reads_it_or_it_is_walked(instances, dtype, key):
    """A "true" anywhere in the body turns the fast path off: the same arrays, or the same error, either way."""
    fast = outcome(json.dumps({key: instances}), dtype)
    walked = outcome(json.dumps({key: instances, "true": True}), dtype)
    if isinstance(fast, str) or isinstance(walked, str):
        assert fast == walked
    else:
        assert fast.dtype == walked.dtype
        same(fast, walked)


# --- Encoding ------------------------------------------------------------------------------------------------------

def test_one_output_in_rows_and_columns():
    int_tensor = np.array([[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 0], [1, 2]]], np.int32)
    assert json.loads(rest_json.encode({"int_tensor": int_tensor}, ROW)) == {"predictions": int_tensor.tolist()}
    assert json.loads(rest_json.encode({"int_tensor": int_tensor}, COLUMNAR)) == {"outputs": int_tensor.tolist()}
    assert json.loads(rest_json.encode({"t": np.arange(1, 6, dtype=np.int32)}, ROW)) == {"predictions": [1, 2, 3, 4, 5]}
    assert json.loads(rest_json.encode({"t": np.array(7, np.int64)}, COLUMNAR)) == {"outputs": 7}


def test_several_outputs_in_rows_and_columns():
    outputs = {"double_scalar_tensor": np.array([8.0, 9.0]),
               "float_tensor": np.array([[1.0], [2.0]], np.float32),
               "int_tensor": np.array([[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 0], [1, 2]]], np.int32),
               "str_tensor": np.array([[b"foo", b"bar"], [b"baz", b"bat"]], object),
               "str_tensor_bytes": np.array([[b"hello", b"world"], [b"tf", b"serving"]], object)}
    assert json.loads(rest_json.encode(outputs, ROW)) == {"predictions": [
        {"double_scalar_tensor": 8.0, "float_tensor": [1.0], "int_tensor": [[1, 2], [3, 4], [5, 6]],
         "str_tensor": ["foo", "bar"], "str_tensor_bytes": [{"b64": "aGVsbG8="}, {"b64": "d29ybGQ="}]},
        {"double_scalar_tensor": 9.0, "float_tensor": [2.0], "int_tensor": [[7, 8], [9, 0], [1, 2]],
         "str_tensor": ["baz", "bat"], "str_tensor_bytes": [{"b64": "dGY="}, {"b64": "c2VydmluZw=="}]}]}
    assert json.loads(rest_json.encode(outputs, COLUMNAR)) == {"outputs": {
        "double_scalar_tensor": [8.0, 9.0], "float_tensor": [[1.0], [2.0]],
        "int_tensor": [[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 0], [1, 2]]],
        "str_tensor": [["foo", "bar"], ["baz", "bat"]],
        "str_tensor_bytes": [[{"b64": "aGVsbG8="}, {"b64": "d29ybGQ="}], [{"b64": "dGY="}, {"b64": "c2VydmluZw=="}]]}}


def test_empty_batches():
    assert json.loads(rest_json.encode({"t": np.zeros((0, 2), np.int32)}, ROW)) == {"predictions": []}
    assert json.loads(rest_json.encode({"s": np.zeros((0, 1, 2), object), "f": np.zeros((0, 3, 4), np.float32)},
                                       ROW)) == {"predictions": []}
    assert json.loads(rest_json.encode({"t": np.zeros((2, 0, 3), np.int32)}, COLUMNAR)) == {"outputs": [[], []]}


def test_floats_are_written_as_tf_serving_writes_them():
    floats = np.array([[9000000, 999999, 0.5], [0.0003, 0.00003, 555557.5]], np.float32)
    assert rest_json.encode({"float_tensor": floats}, ROW) == \
        b'{"predictions": [[9e+06, 999999.0, 0.5], [0.0003, 3e-05, 555557.5]]}'
    special = np.array([[np.nan, np.inf], [3, -np.inf]], np.float32)
    assert rest_json.encode({"float_tensor": special}, ROW) == b'{"predictions": [[NaN, Infinity], [3.0, -Infinity]]}'
    # Six digits when they read back as the same number, else all of float's 9 (double's 17); never float32 -> double
    # noise (0.2 stays 0.2).
    assert rest_json.encode({"y": np.array([0.2, 1 / 3, -0.0, 1e-10, 16777216], np.float32)}, COLUMNAR) == \
        b'{"outputs": [0.2, 0.333333343, -0.0, 1e-10, 16777216.0]}'
    assert rest_json.encode({"y": np.array([0.1, 1 / 3, 2.0**40])}, COLUMNAR) == \
        b'{"outputs": [0.1, 0.33333333333333331, 1099511627776.0]}'
    half = np.array([1.5, np.nan], np.float16), np.array([0.25], ml_dtypes.bfloat16)
    assert [rest_json.encode({"y": a}, COLUMNAR) for a in half] == [b'{"outputs": [1.5, NaN]}', b'{"outputs": [0.25]}']


def test_other_dtypes_are_written_as_tf_serving_writes_them():
    outputs = {"b": np.array([True, False]), "u": np.array([2**64 - 1, 0], np.uint64), "s": np.array([b"\xff"], object)}
    assert rest_json.encode(outputs, COLUMNAR) == \
        b'{"outputs": {"b": [true, false], "u": [18446744073709551615, 0], "s": ["\\ufffd"]}}'


def test_outputs_tf_serving_cannot_write_are_refused_in_its_words():
    with pytest.raises(InvalidJson, match="^Cannot convert empty tensor map to JSON$"):
        rest_json.encode({}, ROW)
    with pytest.raises(InvalidJson, match="^Failed to write JSON value for tensor type: complex64$"):
        rest_json.encode({"tensor": np.array([1, 2], np.complex64)}, ROW)
    with pytest.raises(InvalidJson, match="^Tensor name: tensor has no shape information $"):
        rest_json.encode({"tensor": np.array(1, np.int32)}, ROW)
    with pytest.raises(InvalidJson, match="^Tensor name: s has inconsistent batch size: 1 expecting: 2$"):
        rest_json.encode({"i": np.zeros((2, 3), np.int32), "s": np.zeros((1, 3), object)}, ROW)
    with pytest.raises(InvalidJson, match="inconsistent batch size"):
        rest_json.encode({"i": np.zeros((0, 2), np.int32), "s": np.array([[b"foo", b"bar"]], object)}, ROW)


# --- Round trips ---------------------------------------------------------------------------------------------------

ROUND_TRIP_DTYPES = [np.float32, np.float64, np.int8, np.int32, np.int64, np.uint8, np.uint64, np.bool_]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(ROUND_TRIP_DTYPES).flatmap(
    lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))))
def test_outputs_read_back_as_the_same_inputs(array):
    """Every float (NaN, infinities, -0.0, subnormals included) and integer survives encode then decode, in both
    formats; a float32 in 9 digits at most."""
    for fmt, key, wrap in ((ROW, "instances", list), (COLUMNAR, "inputs", lambda v: v)):
        body = rest_json.encode({"y": array}, fmt)
        value = json.loads(body)["predictions" if fmt == ROW else "outputs"]
        request = decode(json.dumps({key: wrap(value)}), y=array.dtype)
        assert request.format == fmt
        got = request.inputs["y"]
        assert got.dtype == array.dtype and got.shape == array.shape
        np.testing.assert_array_equal(got, array)  # NaN as NaN (its sign and payload are not JSON's)
        if array.dtype.kind == "f":
            assert (np.signbit(got) == np.signbit(array))[~np.isnan(array)].all()


@settings(max_examples=200, deadline=None)
@given(st.floats(width=32))
def test_a_float32_is_written_in_six_digits_or_nine_and_reads_back(value):
    text = rest_json.encode({"y": np.array([value], np.float32)}, COLUMNAR).decode()[len('{"outputs": ['):-2]
    if math.isnan(value):
        assert text == "NaN"
        return
    assert np.float32(float(text.replace("Infinity", "inf"))) == np.float32(value)
    if math.isfinite(value):
        assert "." in text or "e" in text
        assert len(text.lstrip("-").split("e")[0].replace(".", "").strip("0")) <= 9


def test_named_rows_round_trip():
    outputs = {"a": np.arange(6, dtype=np.int64).reshape(3, 2), "b": np.array([0.5, -1.25, 3], np.float32),
               "c_bytes": np.array([b"\x00\x01", b"", b"xyz"], object)}
    value = json.loads(rest_json.encode(outputs, ROW))["predictions"]
    request = decode(json.dumps({"instances": value}), a=I64, b=F32, c_bytes=STRING)
    for name, array in outputs.items():
        assert request.inputs[name].tolist() == array.tolist()
