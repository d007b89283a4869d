"""An executable compiled from a SavedModel signature: inputs and outputs by their SignatureDef names."""
from __future__ import annotations

import pathlib
from typing import Mapping, Sequence

import numpy as np

from xlacs.saved_model.loader import DEFAULT_SIGNATURE, SavedModel, Signature, TensorSpec


class InvalidInput(ValueError):
    """Inputs that do not match the signature: missing, unknown, or of the wrong dtype or shape."""


def _shape_text(spec: TensorSpec) -> str:
    return f"{spec.dtype}{list(spec.shape) if spec.shape is not None else '[...]'}"


def _compiled_spec(name: str, spec: TensorSpec, shape: Sequence[int] | None) -> TensorSpec:
    """The signature's spec, with `shape` (for the dims the SavedModel leaves unknown) when given."""
    if shape is None:
        return spec
    shape = tuple(int(d) for d in shape)
    if spec.shape is not None and (len(shape) != len(spec.shape) or
                                   any(s >= 0 and d != s for d, s in zip(shape, spec.shape))):
        raise InvalidInput(f"shape {list(shape)} of input {name!r} does not fit the signature's "
                           f"{_shape_text(spec)}")
    return TensorSpec(spec.tensor, spec.dtype, shape)


def _names_check(key: str, specs: Mapping[str, TensorSpec], given, *, all_needed: bool) -> None:
    """Refuses names the signature does not take and, with all_needed, inputs it takes that are not given."""
    missing = [n for n in specs if n not in given] if all_needed else []
    unknown = [n for n in given if n not in specs]
    if missing or unknown:
        what = "; ".join(filter(None, [missing and f"missing input(s) {', '.join(map(repr, missing))}",
                                       unknown and f"unknown input(s) {', '.join(map(repr, unknown))}"]))
        expected = ", ".join(f"{n}: {_shape_text(s)}" for n, s in specs.items())
        raise InvalidInput(f"{what}: signature {key!r} takes {expected}")


def check_inputs(key: str, specs: Mapping[str, TensorSpec], inputs: Mapping[str, np.ndarray]) -> None:
    """Raises InvalidInput naming the input and what signature `key` expects, unless `inputs` are exactly its
    inputs with their dtypes and shapes (-1: any size)."""
    _names_check(key, specs, inputs, all_needed=True)
    for name, spec in specs.items():
        array = np.asarray(inputs[name])
        if array.dtype != spec.dtype:
            raise InvalidInput(f"input {name!r} is {array.dtype}; signature {key!r} expects {_shape_text(spec)}")
        if spec.shape is not None and (array.ndim != len(spec.shape) or any(
                s >= 0 and d != s for d, s in zip(array.shape, spec.shape))):
            raise InvalidInput(f"input {name!r} has shape {list(array.shape)}; signature {key!r} expects "
                               f"{_shape_text(spec)}")


class SignatureExecutable:
    """Call it with the signature's inputs by name (a mapping, or keywords); the outputs come back as a dict by
    output name. Inputs that do not match the signature raise InvalidInput, before any call. `executable` is the
    underlying xlacs.Executable (feeds and fetches are the graph's tensor names); its attributes (id, cache,
    stage_ms, upload, ...) read through."""

    def __init__(self, executable, signature: Signature, inputs: Mapping[str, TensorSpec]):
        self.executable = executable
        self.signature_key = signature.key
        self.inputs = dict(inputs)
        self.outputs = dict(signature.outputs)

    def __getattr__(self, name):
        return getattr(self.executable, name)

    def execute(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        check_inputs(self.signature_key, self.inputs, inputs)
        arrays = self.executable.execute({spec.tensor: inputs[name] for name, spec in self.inputs.items()})
        return dict(zip(self.outputs, arrays, strict=True))

    def __call__(self, **inputs: np.ndarray) -> dict[str, np.ndarray]:
        return self.execute(inputs)


def compile_signature(client, signature: Signature, shapes: Mapping[str, Sequence[int]] | None = None,
                      **options) -> SignatureExecutable:
    """Compiles a frozen signature; `shapes` fill in the dimensions it leaves unknown; `options` go to
    Client.compile."""
    shapes = dict(shapes or {})
    _names_check(signature.key, signature.inputs, shapes, all_needed=False)
    inputs = {name: _compiled_spec(name, spec, shapes.get(name)) for name, spec in signature.inputs.items()}
    for name, spec in inputs.items():
        if spec.shape is None:
            raise InvalidInput(f"input {name!r} has no known rank in signature {signature.key!r}; give its shape")
    executable = client.compile(signature.graph_def, {s.tensor: (s.dtype, s.shape) for s in inputs.values()},
                                [s.tensor for s in signature.outputs.values()], **options)
    return SignatureExecutable(executable, signature, inputs)


def compile_saved_model(client, directory, signature: str = DEFAULT_SIGNATURE,
                        shapes: Mapping[str, Sequence[int]] | None = None, name: str = "",
                        **options) -> SignatureExecutable:
    """See Client.compile_saved_model."""
    return compile_signature(client, SavedModel(directory).signature(signature), shapes,
                             name=name or pathlib.Path(directory).resolve().name, **options)
