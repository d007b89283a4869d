"""The signature of a compile with unknown dims: the feeds' unknown dims, grouped by axis (the unknown dims at one
axis of every feed share one size, as a batch does), and which output dims follow each group, found by inferring
the output shapes at two sizes (`probe`, shape inference only): a dim that moves with a group's size, and equals
it at both, is sliced back to the request's size; one that moves otherwise cannot be, and is refused."""
from __future__ import annotations

import dataclasses
from typing import Callable

from xlacs_server.errors import InvalidRequest
from xlacs_server.tensor_sig import TensorSig

UNKNOWN = -1

# The output signature when each unknown axis has the size given for it.
Probe = Callable[[dict[int, int]], list[TensorSig]]


@dataclasses.dataclass(frozen=True)
class DynamicSignature:
    inputs: list[TensorSig]  # -1 where a dim is known only at Execute
    outputs: list[TensorSig]  # -1 where a dim follows an unknown input dim
    follows: list[tuple[int | None, ...]]  # per output dim: the unknown axis it follows, or None

    @property
    def axes(self) -> list[int]:
        """The axes holding an unknown dim of some feed, each with one size per request."""
        return unknown_axes(self.inputs)


def unknown_axes(inputs: list[TensorSig]) -> list[int]:
    return sorted({axis for s in inputs for axis, d in enumerate(s.shape) if d == UNKNOWN})


def at_sizes(shape: tuple[int, ...], sizes: dict[int, int]) -> tuple[int, ...]:
    """`shape` with each unknown dim set to its axis' size."""
    return tuple(sizes[axis] if d == UNKNOWN else d for axis, d in enumerate(shape))


def derive(inputs: list[TensorSig], probe: Probe, low: int, high: int) -> DynamicSignature:
    """The dynamic signature of `inputs` from the outputs at `low` for every axis, then at `high` for one axis at
    a time."""
    axes = unknown_axes(inputs)
    base = probe({axis: low for axis in axes})
    follows = [[None] * len(o.shape) for o in base]
    for axis in axes:
        moved = probe({a: high if a == axis else low for a in axes})
        for out, (at_low, at_high) in enumerate(zip(base, moved)):
            if len(at_low.shape) != len(at_high.shape):
                raise InvalidRequest(f"fetch {at_low.name!r} has rank {len(at_low.shape)} when the unknown dims "
                                     f"at axis {axis} are {low}, {len(at_high.shape)} when they are {high}: its "
                                     f"rank must not depend on them")
            for dim, (d_low, d_high) in enumerate(zip(at_low.shape, at_high.shape)):
                if d_low == d_high:
                    continue
                if (d_low, d_high) != (low, high) or follows[out][dim] is not None:
                    raise InvalidRequest(
                        f"fetch {at_low.name!r}'s dim {dim} is {d_low} when the unknown dims at axis {axis} are "
                        f"{low} and {d_high} when they are {high}: xlacs pads unknown dims and slices back only "
                        f"the output dims equal to one of them; give the feeds' dims static sizes")
                follows[out][dim] = axis
    outputs = [dataclasses.replace(o, shape=tuple(UNKNOWN if a is not None else d for a, d in zip(f, o.shape)))
               for o, f in zip(base, follows)]
    return DynamicSignature(inputs, outputs, [tuple(f) for f in follows])
