"""The element limit of the compile being lowered: a value over it is refused, before it is allocated when
it would be computed on the host."""
from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Callable, Iterator

import jax
import numpy as np

from xlacs_server.config import Settings
from xlacs_server.errors import LimitExceeded

# Scoped to one compile by the service, so that the passes and the engine see the request's settings.
_MAX_ELEMENTS = contextvars.ContextVar("max_tensor_elements", default=Settings.max_tensor_elements)


@contextlib.contextmanager
def max_tensor_elements(limit: int) -> Iterator[None]:
    token = _MAX_ELEMENTS.set(limit)
    try:
        yield
    finally:
        _MAX_ELEMENTS.reset(token)


def max_elements() -> int:
    return _MAX_ELEMENTS.get()


def check_shape(what: str, shape) -> None:
    """Raises LimitExceeded when a tensor of `shape` would hold more elements than the limit."""
    limit = _MAX_ELEMENTS.get()
    count = math.prod(int(d) for d in shape)
    if count > limit:
        raise LimitExceeded(f"{what} has shape {list(shape)}, {count} elements", "max_tensor_elements", limit)


def check_outputs(node: str, op: str, outputs) -> None:
    for index, leaf in enumerate(jax.tree_util.tree_leaves(outputs)):
        check_shape(f"node {node!r} ({op}): output {index}", np.shape(leaf))


def check_before_folding(node: str, op: str, rule: Callable[[], list]) -> None:
    """Runs `rule` abstractly and checks the shapes of its outputs, so that folding Fill([10**6, 10**6], 0)
    on the host fails before it allocates. A rule that needs concrete intermediates cannot run abstractly;
    it is left to the check of its outputs, as are its own errors (the concrete run raises them again)."""
    shapes = []

    def abstract():
        shapes.extend(np.shape(leaf) for leaf in jax.tree_util.tree_leaves(rule()))
        return ()
    try:
        jax.eval_shape(abstract)
    except LimitExceeded:
        raise
    except Exception:
        return
    for index, shape in enumerate(shapes):
        check_shape(f"node {node!r} ({op}): output {index}", shape)
