"""Device memory budgets (max_device_bytes): what the daemon keeps on a device — the weights of its bindings, resident
tensors and variable states — counts together against that device's budget, so that an admission past it is
RESOURCE_EXHAUSTED naming the setting instead of an allocation XLA fails later; an allocation XLA fails anyway (a
program's temporaries found no room) is RESOURCE_EXHAUSTED naming the device and the setting too, never INTERNAL.

The stores charge what they admit and credit what they free (weights.py, resident.py, states.py); the budget's lock
is taken last, under theirs, and calls nothing.
"""
from __future__ import annotations

import collections
import contextlib
import re
import threading
from typing import Iterator

import jax

from xlacs_server.config import Settings
from xlacs_server.errors import DeviceOutOfMemory, LimitExceeded
from xlacs_server.execute.devices import DeviceRef
from xlacs_server.execute.isolation import WorkerFailed

SETTING = "max_device_bytes"
WEIGHTS, RESIDENT, STATES = "weights", "resident", "states"
# On a GPU, the default budget is this share of what PJRT says the device holds (memory_stats' bytes_limit: the pool
# JAX preallocated, gpu_memory_fraction of the GPU): the other fifth is left to programs' temporaries and outputs in
# flight, which XLA allocates from the same pool at each run and the budget does not see.
GPU_FRACTION = 0.8
# XLA's allocator, out of room: its status (a JaxRuntimeError in the daemon, an execution worker's reported text).
_OUT_OF_MEMORY = re.compile(r"RESOURCE_EXHAUSTED|Out of memory")
CAUSE_CHARS = 200  # of XLA's message, quoted in the answer


def default_limit(settings: Settings, device: DeviceRef) -> int:
    """max_device_bytes, or when it is 0 a GPU's GPU_FRACTION of PJRT's bytes_limit; a device whose PJRT reports no
    limit (the CPU, whose memory is the host's; a GPU on the platform allocator) gets the sum of the per-kind bounds,
    the bound on its bytes before there was a budget."""
    if settings.max_device_bytes:
        return settings.max_device_bytes
    limit = (device.device.memory_stats() or {}).get("bytes_limit")
    if limit:
        return int(limit * GPU_FRACTION)
    return settings.max_weight_bytes + settings.max_resident_bytes + settings.max_state_bytes


class DeviceBudget:
    """The budget of each served device and the bytes charged against it, by kind (WEIGHTS, RESIDENT, STATES)."""

    def __init__(self, limits: dict[str, int]):
        self.limits = limits  # by device name
        self._used: dict[str, collections.Counter] = {name: collections.Counter() for name in limits}
        # Reentrant: a weight's credit runs when its buffer is collected, which may happen under the lock.
        self._lock = threading.RLock()

    def used(self, device: str) -> dict[str, int]:
        """The bytes charged on `device`, by kind."""
        with self._lock:
            return {kind: self._used[device][kind] for kind in (WEIGHTS, RESIDENT, STATES)}

    def room(self, device: str) -> int:
        """The bytes `device` may still take."""
        with self._lock:
            return self.limits[device] - sum(self._used[device].values())

    def check(self, device: str, size: int, what: str, kinds: tuple[str, ...] = (WEIGHTS, RESIDENT, STATES)) -> None:
        """LimitExceeded unless `size` more bytes fit beside those of `kinds` on `device`: a bind checks beside the
        resident tensors and states alone, whether evicting weights could make room."""
        with self._lock:
            used = self.used(device)
            if sum(used[k] for k in kinds) + size > self.limits[device]:
                raise LimitExceeded(
                    f"{what} asks {size} bytes of {device}, which holds {sum(used.values())}: {used[WEIGHTS]} of "
                    f"weights, {used[RESIDENT]} of resident tensors, {used[STATES]} of variable states", SETTING,
                    self.limits[device])

    def charge(self, device: str, kind: str, size: int, what: str) -> None:
        """Counts `size` bytes of `kind` on `device`, or raises LimitExceeded (naming `what`) past its budget."""
        with self._lock:
            self.check(device, size, what)
            self._used[device][kind] += size

    def credit(self, device: str, kind: str, size: int) -> None:
        with self._lock:
            self._used[device][kind] -= size

    @contextlib.contextmanager
    def allocating(self, device: str, what: str) -> Iterator[None]:
        """XLA's out-of-memory failures within, on `device` (while doing `what`), as DeviceOutOfMemory."""
        try:
            yield
        except (jax.errors.JaxRuntimeError, WorkerFailed) as e:
            if not _OUT_OF_MEMORY.search(str(e)):
                raise
            cause = str(e).strip().splitlines()[0][:CAUSE_CHARS]
            raise DeviceOutOfMemory(what, device, SETTING, self.limits[device], cause) from e
