"""The PJRT devices this daemon serves: enumerated at start, pinned by --devices, named `kind:index`."""
from __future__ import annotations

import dataclasses
import logging

import jax

from xlacs_server.errors import DeviceUnavailable, InvalidRequest


@dataclasses.dataclass(frozen=True)
class DeviceRef:
    name: str  # "cpu:0", "gpu:1"
    platform: str  # "cpu" or "gpu"
    kind: str  # PJRT's device kind, e.g. "cpu" or "NVIDIA A100-SXM4-80GB"
    device: jax.Device = dataclasses.field(compare=False)


def parse_name(name: str) -> tuple[str, int]:
    kind, sep, index = name.strip().lower().partition(":")
    if kind not in ("cpu", "gpu") or (sep and not index.isdigit()):
        raise InvalidRequest(f"device {name!r} is not of the form cpu:N or gpu:N")
    return kind, int(index or 0)


def canonical(name: str) -> str:
    """`kind:index` in lower case: `GPU`, `gpu` and `gpu:0` name one device."""
    return "%s:%d" % parse_name(name)


class PluginErrors(logging.Filter):
    """JAX's reasons for a PJRT plugin that failed to start (its CUDA plugin on a machine without a GPU), kept for
    the daemon to say, with their tracebacks taken out of JAX's log line: the failure is expected, not a bug."""

    def __init__(self):
        super().__init__()
        self.reasons: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            self.reasons.append(str(record.exc_info[1]))
            record.exc_info, record.exc_text = None, None
        return True


def _platform_devices(platform: str) -> list[jax.Device]:
    try:
        return jax.devices(platform)
    except RuntimeError:  # the platform's PJRT plugin is not installed, or found no device
        return []


def enumerate_devices(pinned: tuple[str, ...] = (), require_gpu: bool = False) -> list[DeviceRef]:
    """Every CPU and GPU device PJRT offers, or only the pinned ones (which must exist), each once. With
    `require_gpu`, at least one GPU must be present."""
    plugin_errors = PluginErrors()
    jax_log = logging.getLogger("jax._src.xla_bridge")
    jax_log.addFilter(plugin_errors)
    try:
        found = [DeviceRef(f"{p}:{i}", p, d.device_kind, d) for p in ("cpu", "gpu")
                 for i, d in enumerate(_platform_devices(p))]
    finally:
        jax_log.removeFilter(plugin_errors)
    if require_gpu and not any(d.platform == "gpu" for d in found):
        why = "; ".join(plugin_errors.reasons) or "PJRT offers no GPU device (is JAX's CUDA plugin installed?)"
        raise DeviceUnavailable(
            f"no GPU: {why}. This daemon serves GPUs only (require_gpu, XLACS_REQUIRE_GPU=1, which the GPU image "
            "sets): run it on a host with the NVIDIA driver and give the container its GPUs (docker run --gpus all, "
            "the compose service xlacs-gpu, the NVIDIA Container Toolkit), or set XLACS_REQUIRE_GPU=0 to serve on "
            "the CPU")
    if not pinned:
        return found
    by_name = {d.name: d for d in found}
    wanted = list(dict.fromkeys(canonical(n) for n in pinned))
    missing = [n for n in wanted if n not in by_name]
    if missing:
        raise DeviceUnavailable(f"pinned device(s) {missing} are not present; present: {sorted(by_name)}")
    return [by_name[n] for n in wanted]


class Devices:
    def __init__(self, devices: list[DeviceRef]):
        self.all = devices
        self._by_name = {d.name: d for d in devices}

    def resolve(self, name: str) -> DeviceRef:
        """The device a request names; an empty name is the first served device (a GPU when present)."""
        if not name:
            gpus = [d for d in self.all if d.platform == "gpu"]
            return (gpus or self.all)[0]
        if canonical(name) not in self._by_name:
            raise DeviceUnavailable(f"device {name!r} is not served here; devices: {sorted(self._by_name)}")
        return self._by_name[canonical(name)]
