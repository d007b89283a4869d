"""The jax and jaxlib the daemon runs on: the range `pyproject.toml`'s server extra allows, both ends tested on the
CPU (tests/compat/test_jax_versions.py). The daemon uses some of jax's private APIs (jax._src), which move between
releases, so its package refuses to import beside any other jax, or a jaxlib other than jax's own, as jax itself
refuses a jaxlib older than it knows."""
from __future__ import annotations

import re

OLDEST, NEWEST = "0.10.2", "0.11.2"


def _release(version: str) -> tuple[int, ...]:
    """The release numbers of a version ("0.11.2" of "0.11.2.dev20250101+abc"); () when it has none."""
    match = re.match(r"\d+(\.\d+)*", version)
    return tuple(int(n) for n in match.group().split(".")) if match else ()


def check(jax_version: str, jaxlib_version: str) -> None:
    """Raises ImportError (name "jax", as `xlacs serve` tells it from a missing module) unless jax is in the
    supported range and jaxlib is the same version."""
    install = f"pip install 'jax>={OLDEST},<={NEWEST}' with the jaxlib of the same version"
    if not _release(OLDEST) <= _release(jax_version) <= _release(NEWEST):
        raise ImportError(f"the xlacs daemon runs on jax {OLDEST} to {NEWEST}; this environment has jax "
                          f"{jax_version}: {install}", name="jax")
    if _release(jaxlib_version) != _release(jax_version):
        raise ImportError(f"the xlacs daemon needs jaxlib of jax's version; this environment has jax {jax_version} "
                          f"and jaxlib {jaxlib_version}: {install}", name="jax")
