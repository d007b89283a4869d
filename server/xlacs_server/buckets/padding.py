"""An Execute's inputs padded with zeros to their bucket, and the outputs sliced back to the request's sizes."""
from __future__ import annotations

import dataclasses

import numpy as np

from xlacs_server.buckets.signature import UNKNOWN, DynamicSignature, at_sizes
from xlacs_server.buckets.sizes import bucket_of
from xlacs_server.errors import InvalidRequest


@dataclasses.dataclass(frozen=True)
class Padded:
    inputs: dict[str, np.ndarray]  # by name, at the bucket's shapes
    sizes: dict[int, int]  # the request's size of each unknown axis
    buckets: tuple[int, ...]  # and its bucket, in axis order
    padding_elements: int  # of the inputs with an unknown dim: zeros added
    padded_elements: int  # and all their elements


def request_sizes(signature: DynamicSignature, given: dict[str, np.ndarray]) -> dict[int, int]:
    """The size of each unknown axis in the request; INVALID_ARGUMENT for a dtype, rank or static dim other than
    the signature's, a missing or unknown input, or feeds that disagree on an axis' size."""
    expected = [s.name for s in signature.inputs]
    if sorted(given) != sorted(expected):
        raise InvalidRequest(f"the executable takes inputs {expected}; got {sorted(given)}")
    sizes: dict[int, tuple[int, str]] = {}
    for sig in signature.inputs:
        array = given[sig.name]
        if array.dtype != sig.dtype or array.ndim != len(sig.shape) or any(
                d != UNKNOWN and d != n for d, n in zip(sig.shape, array.shape)):
            raise InvalidRequest(f"input {sig.name!r}: expected {sig}, got {array.dtype}{list(array.shape)}")
        for axis, d in enumerate(sig.shape):
            if d != UNKNOWN:
                continue
            size, first = sizes.setdefault(axis, (array.shape[axis], sig.name))
            if size != array.shape[axis]:
                raise InvalidRequest(f"inputs {first!r} and {sig.name!r} have sizes {size} and {array.shape[axis]} "
                                     f"at axis {axis}, where both have an unknown dim: they must be equal")
    return {axis: size for axis, (size, _) in sizes.items()}


def pad(signature: DynamicSignature, given: dict[str, np.ndarray], bucket_sizes: tuple[int, ...]) -> Padded:
    """The inputs padded to the smallest bucket of each unknown axis; INVALID_ARGUMENT past the largest."""
    sizes = request_sizes(signature, given)
    buckets = {}
    for axis in signature.axes:
        bucket = bucket_of(sizes[axis], bucket_sizes)
        if bucket is None:
            name = next(s.name for s in signature.inputs if len(s.shape) > axis and s.shape[axis] == UNKNOWN)
            raise InvalidRequest(f"input {name!r} has size {sizes[axis]} at axis {axis}, beyond the largest bucket "
                                 f"{bucket_sizes[-1]} (bucket_sizes {list(bucket_sizes)}): split the request, or "
                                 f"compile with a larger bucket")
        buckets[axis] = bucket
    inputs, padding, padded = {}, 0, 0
    for sig in signature.inputs:
        array = given[sig.name]
        shape = at_sizes(sig.shape, buckets)
        if shape != array.shape:
            bucketed = np.zeros(shape, array.dtype)
            bucketed[tuple(slice(0, n) for n in array.shape)] = array
            array = bucketed
        if UNKNOWN in sig.shape:
            padding += array.size - given[sig.name].size
            padded += array.size
        inputs[sig.name] = array
    return Padded(inputs, sizes, tuple(buckets[axis] for axis in signature.axes), padding, padded)


def unpad(signature: DynamicSignature, outputs: list[np.ndarray], sizes: dict[int, int]) -> list[np.ndarray]:
    """The outputs with each dim that follows an unknown axis sliced back to the request's size for it."""
    return [out if all(a is None for a in follows) else
            np.ascontiguousarray(out[tuple(slice(None) if a is None else slice(0, sizes[a]) for a in follows)])
            for out, follows in zip(outputs, signature.follows)]

