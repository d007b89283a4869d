"""A PJRT executable behind one calling convention, flat arrays in and out, whether just compiled or loaded."""
from __future__ import annotations

import functools

import jax
import numpy as np
from jax._src import compiler as jax_compiler
from jax._src import core
from jax._src.lax import linalg as lax_linalg
from jax._src.lib import xla_client


def compile_options(device: jax.Device | None = None, backend=None) -> xla_client.CompileOptions:
    """The options jax.jit compiles a one-device program with, from jax's flags and XLA_FLAGS; assigned to
    `device`, or to no device (the form the cache key hashes)."""
    return jax_compiler.get_compile_options(1, 1, [[device.id]] if device is not None else None,
                                            backend=device.client if device is not None else backend)


def device_put(arrays: list, device: jax.Device) -> list[jax.Array]:
    """Arrays on `device`: numpy arrays through PJRT's transfer itself (xla_client.batched_device_put), which
    jax.device_put reaches only after its dispatch (docs/data_plane.md: 0.5 ms for two 4-float inputs, 30 µs each
    this way); jax.Arrays (resident tensors, maybe on another device) through jax.device_put."""
    sharding = _sharding(device)
    return [xla_client.batched_device_put(_aval(a.shape, a.dtype), sharding, [a], [device], True)
            if isinstance(a, np.ndarray) else jax.device_put(a, device) for a in arrays]


@functools.cache
def _sharding(device: jax.Device) -> jax.sharding.SingleDeviceSharding:
    return jax.sharding.SingleDeviceSharding(device)


@functools.lru_cache(maxsize=4096)
def _aval(shape: tuple[int, ...], dtype: np.dtype) -> core.ShapedArray:
    return core.ShapedArray(shape, dtype)


class Program:
    """Called as program(*feeds, *weights): every argument is a jax.Array on the program's device. The
    program is compiled with keep_unused, so it takes every argument jax.jit was given, in order."""

    def __init__(self, executable: xla_client.LoadedExecutable):
        self.executable = executable

    def __call__(self, *arrays: jax.Array) -> list[jax.Array]:
        results = self.executable.execute_sharded(list(arrays))
        return [shards[0] for shards in results.disassemble_into_single_device_arrays()]

    def as_text(self) -> str:
        """The optimized HLO."""
        return self.executable.get_hlo_text()

    def serialize(self) -> bytes:
        """Native code: load it back only from a source that you trust (the cache checks a MAC first)."""
        return self.executable.client.serialize_executable(self.executable)

    @classmethod
    def deserialize(cls, serialized: bytes, device: jax.Device) -> "Program":
        if device.platform == "cpu":
            # A program that calls LAPACK (determinants, solves, decompositions) finds its kernels through
            # pointers that jax binds when it lowers such a call; a process that loads the program without
            # lowering one (an execution worker, a replica loading from the cache) must bind them first, or
            # the call jumps to null.
            lax_linalg.initialize_lapack()
        return cls(device.client.deserialize_executable(serialized, xla_client.DeviceList((device,)),
                                                        compile_options(device)))
