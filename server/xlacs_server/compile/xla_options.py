"""XLA's own options, checked before they reach XLA: a bad flag is a clear error at start, never an abort.

Two ways in:
- `XLA_FLAGS` in the daemon's environment: XLA parses it once per process, when the first backend starts, and
  aborts the process on an unknown flag or a bad value. `check_xla_flags` starts that parse in a child
  process first and turns its failure into one line naming the flag.
- `xla_options` (XLACS_XLA_OPTIONS=name=value,...): debug options set on each compile (as jax's
  `.compile(compiler_options=...)` does) over xlacs's `DEFAULTS`, part of the cache key. `check_options` compiles a
  one-op program with them on every device, so an unknown name or a bad value is refused at start with XLA's reason.
  One value is xlacs's, not XLA's: `xla_cpu_experimental_ynn_fusion_type=auto` (the default) is chosen per program
  by `for_program`.
"""
from __future__ import annotations

import functools
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp

Value = bool | int | float | str
CHECK_TIMEOUT_S = 300
YNN = "xla_cpu_experimental_ynn_fusion_type"  # which ops XLA:CPU gives to YNNPACK ("": none)
PER_PROGRAM = "auto"  # YNN's value that for_program resolves for each program
YNN_DOTS = "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"
FUSION_EMITTERS = "xla_cpu_use_fusion_emitters"  # false: XLA:CPU's older elemental emitters (gone in jaxlib 0.11)
# XLA:CPU's own loops (fusions) vectorized 512 bits wide where the CPU has AVX-512, not XLA's 256; LLVM keeps to the
# widest vectors a CPU without it has.
VECTOR_WIDTH = "xla_cpu_prefer_vector_width"
# Set on every compile unless xla_options names them (docs/performance.md, XLA:CPU's convolution library,
# Transformers on XLA:CPU and XLA's loops 512 bits wide).
DEFAULTS: dict[str, Value] = {YNN: PER_PROGRAM, VECTOR_WIDTH: 512}


def parse(items: tuple[str, ...]) -> dict[str, Value]:
    """The compiler options: `DEFAULTS` with the `name=value` items over them (true/false as bools, numbers as
    numbers, the rest as strings); an item `-name` drops a default, so that XLA's own value applies."""
    options, named = dict(DEFAULTS), set()
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        dropped = not sep and name.startswith("-") and not name.startswith("--")
        name = name.removeprefix("-" if dropped else "--")
        if not name or not (sep or dropped):
            raise ValueError(f"xla_options item {item!r} is not name=value (e.g. xla_cpu_use_onednn=true) or "
                             "-name (dropping a default)")
        if name in named:
            raise ValueError(f"xla_options sets {name} twice")
        named.add(name)
        if not dropped:
            options[name] = _value(raw.strip())
        elif options.pop(name, None) is None:
            raise ValueError(f"xla_options item {item!r} drops {name}, which is not a default "
                             f"({', '.join(DEFAULTS)})")
    return options


def _value(raw: str) -> Value:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def identity(options: dict[str, Value]) -> str:
    """The options as the cache key spells them: sorted, each with its type."""
    return ",".join(f"{name}={value!r}" for name, value in sorted(options.items()))


def for_program(options: dict[str, Value], stablehlo: str) -> dict[str, Value]:
    """The options XLA gets for one program (StableHLO text). YNN's `auto` becomes YNNPACK for the dots of a program
    with more dots than convolutions: the transformers (0.95-1.01x TF graph mode with it, 1.01-1.25x without) and
    ConvNeXt, whose pointwise layers are dots (6% faster). The rest, the CNNs of convolutions, get YNNPACK off, so
    that their convolutions run on Eigen's kernels, faster there, and the 1x1 ones that XLA rewrites as dots stay
    there too (docs/performance.md)."""
    if options.get(YNN) != PER_PROGRAM:
        return options
    dots = stablehlo.count("stablehlo.dot") > stablehlo.count("stablehlo.convolution")  # dot and dot_general
    return {**options, YNN: YNN_DOTS if dots else ""}


def _resolutions(options: dict[str, Value]) -> list[dict[str, Value]]:
    """Every value for_program may give `options`."""
    return [options] if options.get(YNN) != PER_PROGRAM else [{**options, YNN: v} for v in ("", YNN_DOTS)]


@functools.cache
def elemental_emitters() -> dict[str, Value]:
    """The option that turns XLA:CPU's elemental emitters on where this process's XLA still has them (jaxlib 0.10),
    else none: jaxlib 0.11's XLA has only its MLIR fusion emitters and refuses the option's name."""
    try:
        _compile({FUSION_EMITTERS: False}, jax.devices("cpu")[0])
    except jax.errors.JaxRuntimeError as e:
        if "No such compile option" not in str(e):
            raise
        return {}
    return {FUSION_EMITTERS: False}


def _compile(options: dict[str, Value], device: jax.Device) -> None:
    """Compiles a one-op program with `options` on `device`: XLA raises its runtime error, naming the option and
    the reason, when it refuses one."""
    probe = jnp.zeros((2,), jnp.float32, device=device)
    jax.jit(jnp.negative).lower(probe).compile(compiler_options=options)


def check_options(options: dict[str, Value], devices: list[jax.Device]) -> None:
    """Raises ValueError naming the option XLA refuses on one of `devices`, in any program's resolution."""
    if not options:
        return
    for device, resolved in ((d, r) for d in devices for r in _resolutions(options)):
        try:
            _compile(resolved, device)
        except Exception as e:  # XLA raises its runtime error type; its text names the option and the reason
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise ValueError(f"xla_options {identity(options)} refused by XLA on {device.platform}: {reason}; "
                             "the names are XLA DebugOptions fields (xla/xla.proto)") from None


def check_xla_flags(environ=os.environ) -> None:
    """Raises ValueError with XLA's complaint when XLA_FLAGS would abort the daemon's first backend start."""
    flags = environ.get("XLA_FLAGS", "").strip()
    if not flags:
        return
    probe = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"], env=dict(environ),
                           capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
    if probe.returncode == 0:
        return
    # XLA logs the reason as an error or fatal line (glog: `E1123 11:50:01.757 123 file.cc:93] reason`).
    logged = [m.group(1) for m in re.finditer(r"^[EF]\d{4} [^\]]*\] (.*)$", probe.stderr, re.MULTILINE)]
    reason = (logged or probe.stderr.strip().splitlines()[-1:] or [f"exit status {probe.returncode}"])[0]
    raise ValueError(f"XLA_FLAGS={flags!r} stops XLA from starting: {reason}")
