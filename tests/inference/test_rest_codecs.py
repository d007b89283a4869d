"""The REST bodies of the protocol without a server: JSON tensors (nested and flat, checked element by element),
Triton's binary data extension both ways, and every malformed request refused naming the input or parameter at
fault."""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from xlacs_server.errors import InvalidRequest, Unavailable, Unimplemented
from xlacs_server.inference import binary_data, infer_request, json_tensors
from xlacs_server.models.datatypes import DATATYPES, to_numpy
from xlacs_server.models.served_signature import TensorMetadata


class Model:
    """What the codecs read of a served model: its name, version, state, reason, inputs and max_batch_size."""

    def __init__(self, inputs: list[TensorMetadata], max_batch_size: int = 0, state: str = "READY"):
        self.name, self.version, self.inputs, self.max_batch_size = "m", "1", inputs, max_batch_size
        self.state, self.reason = state, "" if state == "READY" else "its load failed"

    def __repr__(self) -> str:
        return "model 'm' version 1"


def binary_body(request: dict, *arrays: np.ndarray) -> tuple[bytes, str]:
    """A body as tritonclient makes it: the JSON, then the arrays' little-endian bytes; and its header length."""
    header = json.dumps(request).encode()
    return header + b"".join(a.astype(a.dtype.newbyteorder("<")).tobytes() for a in arrays), str(len(header))


@pytest.mark.parametrize("datatype", DATATYPES)
def test_json_tensors_round_trip_every_datatype_flat_and_nested(datatype):
    dtype = to_numpy(datatype, "x")
    values = np.arange(6).reshape(2, 3) % 2 if datatype == "BOOL" else np.arange(6).reshape(2, 3)
    array = values.astype(dtype)
    flat = json.loads(json.dumps(json_tensors.encode(array)))
    assert len(flat) == 6
    nested = json.loads(json.dumps(array.astype(bool if datatype == "BOOL" else float).tolist()
                                   if dtype.kind in "fV" else array.tolist()))
    for data in (flat, nested):
        got = json_tensors.decode(data, dtype, [2, 3], "input 'x'")
        assert got.dtype == dtype and got.shape == (2, 3)
        np.testing.assert_array_equal(got.astype(np.float64), array.astype(np.float64))


def test_json_half_precision_outputs_are_numbers():
    assert json_tensors.encode(np.array([1.5, -2.25], np.float16)) == [1.5, -2.25]
    assert json_tensors.encode(np.array([[0.5], [3.0]], ml_dtypes.bfloat16)) == [0.5, 3.0]


@pytest.mark.parametrize("data, datatype, shape, says", [
    ([1, 2, 3], "INT32", [2, 2], "3 elements, but shape [2, 2] takes 4"),
    ([[1], [2, 3]], "FP32", [3], "nested unevenly"),
    ([1.5, 2], "INT32", [2], "floating-point numbers"),
    ([300], "INT8", [1], "out of its datatype's range (-128 to 127)"),
    ([-1], "UINT16", [1], "out of its datatype's range (0 to 65535)"),
    ([1, 0], "BOOL", [2], "takes true or false"),
    (["a"], "FP32", [1], "holds strings"),
    ([1e300], "FP32", [1], "out of its datatype's range"),
    ({"a": 1}, "FP32", [1], "must be a JSON array"),
])
def test_json_data_that_does_not_fit_is_refused_naming_the_input(data, datatype, shape, says):
    with pytest.raises(InvalidRequest, match="input 'x'") as caught:
        json_tensors.decode(data, to_numpy(datatype, "x"), shape, "input 'x'")
    assert says in str(caught.value)


def test_a_request_with_json_and_binary_inputs_and_binary_outputs():
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    flags = np.array([True, False, True])
    body, length = binary_body({
        "id": "42", "parameters": {"binary_data_output": True, "timeout": 2_500_000},
        "inputs": [{"name": "a", "shape": [2, 4], "datatype": "FP32", "parameters": {"binary_data_size": 32}},
                   {"name": "j", "shape": [2], "datatype": "INT64", "data": [[7], [8]]},
                   {"name": "f", "shape": [3], "datatype": "BOOL", "parameters": {"binary_data_size": 3}}],
        "outputs": [{"name": "y", "parameters": {"binary_data": False}}, {"name": "z"}]}, a, flags)
    request = infer_request.parse(body, length, Model([]))
    assert request.id == "42" and request.timeout_s == 2.5 and request.outputs == ["y", "z"]
    np.testing.assert_array_equal(request.inputs["a"], a)
    np.testing.assert_array_equal(request.inputs["j"], [7, 8])
    np.testing.assert_array_equal(request.inputs["f"], flags)

    y, z = np.array([[1.5, 2.5]], np.float32), np.array([3, 4], np.int32)
    content, headers, media_type = infer_request.response(Model([]), request, {"y": y, "z": z})
    size = int(headers[binary_data.HEADER])
    answer = json.loads(content[:size])
    assert media_type == binary_data.BINARY_TYPE and answer["id"] == "42" and answer["model_version"] == "1"
    assert answer["outputs"][0] == {"name": "y", "datatype": "FP32", "shape": [1, 2], "data": [1.5, 2.5]}
    assert answer["outputs"][1] == {"name": "z", "datatype": "INT32", "shape": [2],
                                    "parameters": {"binary_data_size": 8}}
    np.testing.assert_array_equal(np.frombuffer(content[size:], "<i4"), z)


def test_a_json_only_answer_is_plain_json():
    request = infer_request.parse(json.dumps({"inputs": []}).encode(), None, Model([]))
    content, headers, media_type = infer_request.response(Model([]), request, {"y": np.array([1.0, np.nan])})
    assert headers == {} and media_type == binary_data.JSON_TYPE
    assert json.loads(content)["outputs"][0]["data"][0] == 1.0  # NaN is written as Python's json writes it


def test_a_raw_binary_body_is_the_only_input_a_batch_of_one():
    model = Model([TensorMetadata("x", "FP32", (-1, 2, -1))], max_batch_size=4)
    x = np.arange(6, dtype=np.float32)
    request = infer_request.parse(x.tobytes(), "0", model)
    np.testing.assert_array_equal(request.inputs["x"], x.reshape(1, 2, 3))
    assert request.outputs is None and request.binary_default
    with pytest.raises(InvalidRequest, match="does not fit input 'x'"):
        infer_request.parse(x.tobytes()[:20], "0", model)
    with pytest.raises(Unavailable, match="model 'm' version 1 is LOADING: its load failed"):
        infer_request.parse(x.tobytes(), "0", Model([], state="LOADING"))
    with pytest.raises(InvalidRequest, match="needs a model of one input"):
        infer_request.parse(x.tobytes(), "0", Model([TensorMetadata("a", "FP32", (2,)),
                                                     TensorMetadata("b", "FP32", (2,))]))


def _input(**fields) -> dict:
    return {"name": "x", "shape": [2], "datatype": "FP32", **fields}


@pytest.mark.parametrize("request_json, binary, says", [
    ({"inputs": [_input(parameters={"binary_data_size": 4})]}, 4, "binary_data_size is 4 bytes, but shape [2]"),
    ({"inputs": [_input(parameters={"binary_data_size": 8})]}, 4, "ends 4 bytes short"),
    ({"inputs": [_input(parameters={"binary_data_size": 8})]}, 12, "add up to 8"),
    ({"inputs": [_input(data=[1, 2], parameters={"binary_data_size": 8})]}, 8, "both \"data\" and"),
    ({"inputs": [_input()]}, 0, "neither \"data\" nor"),
    ({"inputs": [_input(datatype="BYTES", data=["a", "b"])]}, 0, "xlacs serves numeric tensors only"),
    ({"inputs": [_input(datatype="FP8", data=[1, 2])]}, 0, "not a datatype of the protocol"),
    ({"inputs": [_input(shape=[-1], data=[1])]}, 0, "list of non-negative integers"),
    ({"inputs": [_input(data=[1, 2]), _input(data=[3, 4])]}, 0, "input 'x' is given twice"),
    ({"inputs": [_input(data=[1, 2], parameters={"colour": "red"})]}, 0, "no parameter 'colour'"),
    ({"inputs": [_input(data=[1, 2])], "parameters": {"timeout": -5}}, 0, "positive number of microseconds"),
    ({"inputs": [_input(data=[1, 2])], "parameters": {"binary_data_output": "yes"}}, 0, "true or false"),
    ({"inputs": [_input(data=[1, 2])], "outputs": [{"name": 3}]}, 0, "every tensor of the request is named"),
    ({"inputs": {"x": [1, 2]}}, 0, "must be a list of objects"),
    ({"inputs": [_input(data=[1, 2])], "id": 7}, 0, "\"id\" is 7"),
])
def test_malformed_requests_are_refused_naming_what_is_wrong(request_json, binary, says):
    body, length = binary_body(request_json, np.zeros(binary, np.uint8))
    with pytest.raises(InvalidRequest) as caught:
        infer_request.parse(body, length if binary else None, Model([]))
    assert says in str(caught.value)


@pytest.mark.parametrize("parameters, says", [
    ({"sequence_id": 3}, "no sequence batcher"),
    ({"priority": 1}, "arrival order"),
])
def test_parameters_of_extensions_xlacs_leaves_out_are_unimplemented(parameters, says):
    body = json.dumps({"inputs": [_input(data=[1, 2])], "parameters": parameters}).encode()
    with pytest.raises(Unimplemented, match=says):
        infer_request.parse(body, None, Model([]))
    body = json.dumps({"inputs": [_input(parameters={"shared_memory_region": "r"})]}).encode()
    with pytest.raises(Unimplemented, match="input 'x': parameter 'shared_memory_region' is not offered"):
        infer_request.parse(body, None, Model([]))


@pytest.mark.parametrize("length", ["-1", "abc", "1000"])
def test_a_header_length_that_does_not_fit_the_body_is_refused(length):
    with pytest.raises(InvalidRequest, match="Inference-Header-Content-Length"):
        binary_data.split(b"{}", length)


def test_bool_binary_data_holds_only_zeros_and_ones():
    body, length = binary_body({"inputs": [{"name": "f", "shape": [2], "datatype": "BOOL",
                                            "parameters": {"binary_data_size": 2}}]}, np.array([1, 2], np.uint8))
    with pytest.raises(InvalidRequest, match="input 'f': BOOL binary data holds bytes other than 0 and 1"):
        infer_request.parse(body, length, Model([]))


def test_a_body_that_is_not_json_says_so():
    with pytest.raises(InvalidRequest, match="does not parse"):
        infer_request.parse(b"{not json", None, Model([]))
