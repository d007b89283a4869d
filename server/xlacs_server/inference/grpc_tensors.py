"""The protocol's gRPC infer messages <-> arrays: a ModelInferRequest's inputs (raw_input_contents, or the typed
InferTensorContents) into arrays by name, its parameters and requested outputs checked, and the outputs back as
raw_output_contents (what tritonclient and Triton's own server use). Each mistake is InvalidRequest naming the input
or output; the model's own checks (names, datatypes against its inputs, shapes) are ServedModel.infer's."""
from __future__ import annotations

import dataclasses

import numpy as np

from xlacs_server.errors import InvalidRequest, LimitExceeded
from xlacs_server.inference import parameters
from xlacs_server.inference.v2 import grpc_service_pb2 as pb
from xlacs_server.models import datatypes

REQUEST_PARAMETERS = ("timeout",)  # binary_data_output is REST's: over gRPC every output is raw bytes
# The typed field of InferTensorContents holding each datatype (FP16 and BF16 have none: raw bytes only).
CONTENTS = {
    "BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
    "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents", "UINT32": "uint_contents",
    "UINT64": "uint64_contents", "FP32": "fp32_contents", "FP64": "fp64_contents",
}


@dataclasses.dataclass
class InferRequest:
    inputs: dict[str, np.ndarray]
    outputs: list[str] | None  # None: every output of the model
    timeout_s: float | None  # the request's "timeout" parameter


def parameter_values(given) -> dict:
    """A map of InferParameter (or ModelRepositoryParameter) as plain values, as parameters.check takes them."""
    return {name: getattr(p, p.WhichOneof("parameter_choice")) if p.WhichOneof("parameter_choice") else None
            for name, p in given.items()}


def parse(request: pb.ModelInferRequest, max_input_bytes: int) -> InferRequest:
    """The request's inputs, requested outputs and deadline; LimitExceeded when its inputs are over
    max_input_bytes together."""
    options = parameters.check(parameter_values(request.parameters), REQUEST_PARAMETERS, "the request")
    timeout_s = parameters.timeout_s(options)
    raw = request.raw_input_contents
    if raw and len(raw) != len(request.inputs):
        raise InvalidRequest(f"raw_input_contents has {len(raw)} entries for {len(request.inputs)} inputs: give "
                             "one entry per input, in the order of inputs")
    inputs, size = {}, 0
    for i, given in enumerate(request.inputs):
        where = f"input {given.name!r}"
        if given.name in inputs:
            raise InvalidRequest(f"{where} is given twice")
        parameters.check(parameter_values(given.parameters), (), where)
        array = _input(given, raw[i] if raw else None, where)
        size += array.nbytes
        if size > max_input_bytes:
            raise LimitExceeded(f"the request's inputs have {size} bytes or more", "max_input_bytes",
                                max_input_bytes)
        inputs[given.name] = array
    outputs = None
    if request.outputs:
        outputs = []
        for wanted in request.outputs:
            parameters.check(parameter_values(wanted.parameters), (), f"output {wanted.name!r}")
            outputs.append(wanted.name)
    return InferRequest(inputs, outputs, timeout_s)


def response(model, request_id: str, outputs: dict[str, np.ndarray]) -> pb.ModelInferResponse:
    """The answer: each output's name, datatype and shape, its bytes in raw_output_contents (in the same order)."""
    answer = pb.ModelInferResponse(model_name=model.name, model_version=model.version, id=request_id)
    for name, array in outputs.items():
        answer.outputs.add(name=name, datatype=datatypes.from_numpy(array.dtype), shape=array.shape)
        answer.raw_output_contents.append(np.ascontiguousarray(array).tobytes())
    return answer


def _input(given, raw: bytes | None, where: str) -> np.ndarray:
    if any(d < 0 for d in given.shape):
        raise InvalidRequest(f"{where} has shape {list(given.shape)}; every dim must be 0 or more")
    dtype = datatypes.to_numpy(given.datatype, where)
    shape = tuple(given.shape)
    count = int(np.prod(shape, dtype=np.int64))
    typed = given.contents.ListFields()
    if raw is not None:
        if typed:
            raise InvalidRequest(f"{where} has both contents and raw_input_contents: give its data in one of them "
                                 "(raw_input_contents for every input, or contents for every input)")
        if len(raw) != count * dtype.itemsize:
            raise InvalidRequest(f"{where}: raw_input_contents has {len(raw)} bytes; shape {list(shape)} of "
                                 f"{given.datatype} takes {count * dtype.itemsize}")
        return np.frombuffer(raw, dtype).reshape(shape)
    field = CONTENTS.get(given.datatype)
    if field is None:
        raise InvalidRequest(f"{where} is {given.datatype}, which has no typed contents: send it in "
                             "raw_input_contents")
    if [f.name for f, _ in typed] not in ([field], []):
        raise InvalidRequest(f"{where} is {given.datatype}, whose typed contents are {field}, not "
                             f"{', '.join(f.name for f, _ in typed)}")
    values = getattr(given.contents, field)
    if len(values) != count:
        raise InvalidRequest(f"{where}: contents.{field} has {len(values)} elements; shape {list(shape)} takes "
                             f"{count}")
    wide = np.asarray(values, dtype=np.int64 if field == "int_contents" else np.uint64 if field == "uint_contents"
                      else dtype)
    if dtype.kind in "iu" and wide.size:
        limits = np.iinfo(dtype)
        if wide.min() < limits.min or wide.max() > limits.max:
            raise InvalidRequest(f"{where}: contents.{field} holds values outside {given.datatype}'s range "
                                 f"{limits.min} to {limits.max}")
    return wide.astype(dtype).reshape(shape)
