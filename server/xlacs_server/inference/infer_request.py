"""The REST infer endpoint's bodies: the protocol's inference request (JSON tensors, binary data after the JSON, or
a raw binary body for a model of one input) into arrays by name, and the outputs back into a response. Each mistake
is InvalidRequest naming the input or output; the model's own checks (names, datatypes against its inputs, shapes)
are ServedModel.infer's."""
from __future__ import annotations

import dataclasses
import json

import numpy as np

from xlacs_server.errors import InvalidRequest
from xlacs_server.inference import binary_data, json_tensors, parameters
from xlacs_server.models import datatypes
from xlacs_server.models.model import ready


@dataclasses.dataclass
class InferRequest:
    id: str | None
    inputs: dict[str, np.ndarray]
    outputs: list[str] | None  # None: every output of the model
    binary: dict[str, bool]  # output -> sent as binary data
    binary_default: bool  # for outputs not in `binary`
    timeout_s: float | None


def parse(body: bytes, header_length: str | None, model) -> InferRequest:
    """The request in `body`; `header_length` is the Inference-Header-Content-Length header (None if absent)."""
    header, binary = binary_data.split(body, header_length)
    if header_length is not None and int(header_length) == 0:
        return _raw(binary, model)
    try:
        request = json.loads(header)
    except (UnicodeDecodeError, ValueError) as e:
        raise InvalidRequest(f"the request's JSON object does not parse ({e}); send the protocol's inference "
                             "request (with Inference-Header-Content-Length when binary data follows it)") from None
    if not isinstance(request, dict):
        raise InvalidRequest(f"the request must be a JSON object, not {type(request).__name__}")
    request_id = request.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise InvalidRequest(f"the request's \"id\" is {request_id!r}; it must be a string")
    options = parameters.check(request.get("parameters", {}), parameters.REQUEST, "the request")
    reader = binary_data.Reader(binary)
    inputs = {}
    for item in _list(request, "inputs", required=True):
        name, array = _input(item, reader)
        if name in inputs:
            raise InvalidRequest(f"input {name!r} is given twice")
        inputs[name] = array
    reader.finish()
    outputs, binary_outputs = None, {}
    if "outputs" in request:
        outputs = []
        for item in _list(request, "outputs"):
            name = _name(item, "an output")
            where = f"output {name!r}"
            options_of = parameters.check(item.get("parameters", {}), parameters.OUTPUT, where)
            if "binary_data" in options_of:
                binary_outputs[name] = parameters.flag(options_of, "binary_data", where)
            outputs.append(name)
    return InferRequest(request_id, inputs, outputs, binary_outputs,
                        parameters.flag(options, "binary_data_output", "the request"), parameters.timeout_s(options))


def response(model, request: InferRequest, outputs: dict[str, np.ndarray]) -> tuple[bytes, dict[str, str], str]:
    """(body, headers, media type) of the answer: the outputs in the order requested (the model's without a list)."""
    items, chunks = [], []
    for name, array in outputs.items():
        item = {"name": name, "datatype": datatypes.from_numpy(array.dtype), "shape": list(array.shape)}
        if request.binary.get(name, request.binary_default):
            chunks.append(binary_data.raw(array))
            item["parameters"] = {binary_data.SIZE: len(chunks[-1])}
        else:
            item["data"] = json_tensors.encode(array)
        items.append(item)
    header = {"model_name": model.name, "model_version": model.version}
    if request.id is not None:
        header["id"] = request.id
    header["outputs"] = items
    return binary_data.body(header, chunks)


def metadata_of(models, name: str, version: str = "") -> dict:
    """The protocol's model metadata (as JSON) of a READY version (the highest ready one without a version): what
    both transports' metadata calls answer."""
    model = ready(models.model(name, version))
    return {"name": model.name, "platform": model.platform,
            "versions": [s.version for s in models.index() if s.name == model.name and s.version],
            "inputs": [_tensor(t) for t in model.inputs], "outputs": [_tensor(t) for t in model.outputs]}


def _tensor(metadata) -> dict:
    return {"name": metadata.name, "datatype": metadata.datatype, "shape": list(metadata.shape)}


def _input(item, reader: binary_data.Reader) -> tuple[str, np.ndarray]:
    name = _name(item, "an input")
    where = f"input {name!r}"
    shape = item.get("shape")
    if not isinstance(shape, list) or any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in shape):
        raise InvalidRequest(f"{where}: \"shape\" is {shape!r}; it must be a list of non-negative integers")
    dtype = datatypes.to_numpy(str(item.get("datatype")), where)
    size = binary_data.size_of(parameters.check(item.get("parameters", {}), parameters.INPUT, where), where)
    if size is None:
        if "data" not in item:
            raise InvalidRequest(f"{where} has neither \"data\" nor a {binary_data.SIZE} parameter: give its "
                                 "elements as JSON, or as binary data after the JSON object")
        return name, json_tensors.decode(item["data"], dtype, shape, where)
    if "data" in item:
        raise InvalidRequest(f"{where} has both \"data\" and a {binary_data.SIZE} parameter: give one")
    return name, reader.tensor(size, dtype, shape, where)


def _raw(binary: memoryview, model) -> InferRequest:
    """A body of one input's bytes alone (Inference-Header-Content-Length 0): the model's only input, a batch of one
    for a batching model, its one variable dim (if any) from the size; every output as binary data."""
    if len(ready(model).inputs) != 1:
        raise InvalidRequest(f"a raw binary request (Inference-Header-Content-Length 0) needs a model of one input; "
                             f"{model!r} takes {[i.name for i in model.inputs]}: send the JSON object first")
    meta = model.inputs[0]
    dtype = datatypes.to_numpy(meta.datatype, f"input {meta.name!r}")
    shape = [1, *meta.shape[1:]] if model.max_batch_size else list(meta.shape)
    known = json_tensors.elements([d for d in shape if d != -1]) * dtype.itemsize
    if shape.count(-1) > 1 or not known or len(binary) % known:
        raise InvalidRequest(f"a raw binary request of {len(binary)} bytes does not fit input {meta.name!r} of shape "
                             f"{shape} ({meta.datatype}): send the JSON object with its shape first")
    shape = [len(binary) // known if d == -1 else d for d in shape]
    reader = binary_data.Reader(binary)
    inputs = {meta.name: reader.tensor(len(binary), dtype, shape, f"input {meta.name!r}")}
    return InferRequest(None, inputs, None, {}, True, None)


def _list(request: dict, key: str, required: bool = False) -> list:
    items = request.get(key)
    if items is None and not required:
        return []
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise InvalidRequest(f"the request's {key!r} must be a list of objects, one a tensor")
    return items


def _name(item: dict, what: str) -> str:
    name = item.get("name")
    if not isinstance(name, str):
        raise InvalidRequest(f"{what} has \"name\" {name!r}; every tensor of the request is named by a string")
    return name
