"""The op lowering registry, as tf2xla's REGISTER_XLA_OP: op names, attrs, dtypes, devices, constant inputs.

A rule is `rule(ctx, *inputs, **attrs) -> list`: operands positional, attrs keyword-only. The attrs a
rule takes are its keyword-only parameters. Whether one is required is TF's OpDef's word: the importer gives
a node that lacks an attr its OpDef's default (graph/op_defs.py), so a rule restates none of TF's defaults.
Only for an attr TF does not declare (of an internal op, which TF does not register) does the rule's own
default make it optional. Graph nodes
are checked against the registration when the graph loads, never mid-lowering.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Callable, Iterable

import numpy as np

from xlacs_server.graph.op_defs import attr_defs

PLATFORMS = ("cpu", "gpu")


@dataclasses.dataclass(frozen=True)
class Lowering:
    op: str
    rule: Callable
    attrs: dict[str, bool]  # attr name -> required
    input_names: tuple[str, ...]  # the rule's positional parameter names, for error messages
    dtypes: frozenset | None  # allowed values of `type_attr`; None allows any
    type_attr: str
    devices: frozenset[str]
    constant_inputs: tuple[int | str, ...]
    foldable: bool  # may run on the host when every input is a constant
    platform: str | None  # None: the generic rule; otherwise an override for one platform
    data_dependent_shape: bool = False  # the output's shape depends on the values of the constant inputs
    internal: bool = False  # an op of xlacs' own that only a pass writes: not in a client's graph, nor listed

    @property
    def module(self) -> str:
        # A functools.partial's own __module__ is "functools": name the module of the function it wraps.
        return getattr(getattr(self.rule, "func", self.rule), "__module__", "")

    @property
    def constant_input_names(self) -> list[str]:
        """The declared constant inputs by name, for listings."""
        return [self.constant_input_index(c, len(self.input_names))[1] for c in self.constant_inputs]

    def constant_input_index(self, spec: int | str, arity: int) -> tuple[int, str]:
        """The input position and the name an error uses for a declared constant input."""
        if isinstance(spec, str):
            return self.input_names.index(spec), spec
        index = spec % arity if arity else spec
        if 0 <= index < len(self.input_names):
            return index, self.input_names[index]
        return index, "last input" if spec == -1 else f"input {spec}"


class DuplicateRegistration(RuntimeError):
    pass


_REGISTRY: dict[tuple[str, str | None], Lowering] = {}


def _signature(op: str, rule: Callable) -> tuple[dict[str, bool], tuple[str, ...]]:
    """The rule's attrs for `op` (name -> required) and its input names."""
    params = list(inspect.signature(rule).parameters.values())[1:]  # skip ctx
    declared = attr_defs(op) or {}
    attrs = {p.name: declared[p.name].required if p.name in declared else p.default is inspect.Parameter.empty
             for p in params if p.kind is p.KEYWORD_ONLY}
    names = tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    return attrs, names


def register_op(*ops: str, dtypes: Iterable | None = None, type_attr: str = "T",
                devices: Iterable[str] = PLATFORMS, constant_inputs: Iterable[int | str] = (),
                foldable: bool = True, platform: str | None = None, data_dependent_shape: bool = False,
                internal: bool = False):
    """Registers `rule` for each of `ops`. A second, different registration of an (op, platform) raises."""
    def decorate(rule: Callable) -> Callable:
        for op in ops:
            attrs, input_names = _signature(op, rule)
            lowering = Lowering(op, rule, attrs, input_names,
                                None if dtypes is None else frozenset(np.dtype(d) for d in dtypes),
                                type_attr, frozenset(devices), tuple(constant_inputs), foldable, platform,
                                data_dependent_shape, internal)
            previous = _REGISTRY.get((op, platform))
            if previous is not None and previous != lowering:
                raise DuplicateRegistration(f"{op} (platform {platform or 'any'}) is registered twice: "
                                            f"{previous.module}.{previous.rule.__name__} and "
                                            f"{lowering.module}.{getattr(rule, '__name__', rule)}")
            _REGISTRY[(op, platform)] = lowering
        return rule
    return decorate


def lookup(op: str, platform: str) -> Lowering | None:
    """The platform's override of `op` if any, else the generic rule, if it runs on that platform."""
    lowering = _REGISTRY.get((op, platform)) or _REGISTRY.get((op, None))
    if lowering is None or platform not in lowering.devices:
        return None
    return lowering


def registrations() -> list[Lowering]:
    """Every generic registration, with platform overrides following their op, sorted by op name; not the
    internal ops, which are no TF op."""
    return sorted((l for l in _REGISTRY.values() if not l.internal), key=lambda l: (l.op, l.platform or ""))


def overrides(op: str) -> list[str]:
    return sorted(p for (name, p) in _REGISTRY if name == op and p is not None)
