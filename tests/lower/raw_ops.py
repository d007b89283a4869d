"""Helpers for the per-op math tests: tf.raw_ops called by position, tolerances by dtype, and one compile
checking an op at several dtypes."""
import inspect

import ml_dtypes
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import kernels, op_def_registry

from tests.oracle import assert_close, specs_of, traced
from xlacs import freeze

HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def op(name: str, **attrs):
    """tf.raw_ops.<name> as a function of its inputs in OpDef order, with `attrs` bound."""
    fn = getattr(tf.raw_ops, name)
    # The Python wrapper renames some inputs (Sum's reduction_indices is `axis`) but keeps their order.
    input_names = list(inspect.signature(fn).parameters)[:len(op_def_registry.get(name).input_arg)]
    return lambda *inputs: fn(**dict(zip(input_names, inputs)), **attrs)


def has_cpu_kernel(name: str, attr: str, dtype) -> bool:
    """Whether TF (the oracle) can run the op for `attr`=dtype on CPU: some dtypes have only XLA kernels."""
    enum = tf.as_dtype(dtype).as_datatype_enum
    for kernel in kernels.get_registered_kernels_for_op(name).kernel:
        allowed = {c.name: c.allowed_values.list.type for c in kernel.constraint}
        if kernel.device_type == "CPU" and (attr not in allowed or enum in allowed[attr]):
            return True
    return False


def tolerance(dtype) -> dict:
    """rtol/atol for comparing with TF at the dtype's own precision."""
    dtype = np.dtype(dtype)
    if dtype in HALF:
        return {"rtol": 2e-2, "atol": 2e-2}
    if dtype in (np.float64, np.complex128):
        return {"rtol": 1e-10, "atol": 1e-12}
    return {"rtol": 1e-4, "atol": 1e-5}


def compare_per_dtype(client, fn_of, inputs_of, dtypes):
    """One compile for all `dtypes`: fn_of(dtype) takes the arrays inputs_of(dtype); each dtype's outputs are
    checked against TF at that dtype's tolerance, and a failure names the dtype."""
    args = [inputs_of(d) for d in dtypes]
    flat = [a for group in args for a in group]

    def fn(*xs):
        outputs, start = [], 0
        for d, group in zip(dtypes, args):
            out = fn_of(d)(*xs[start:start + len(group)])
            outputs.append(list(out) if isinstance(out, (list, tuple)) else [out])
            start += len(group)
        return [o for group in outputs for o in group]
    frozen = freeze(traced(fn), *specs_of(flat))
    got = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches).execute(dict(zip(frozen.feeds, flat)))
    want = fn(*[tf.constant(a) for a in flat])
    per_dtype = len(want) // len(dtypes)
    for i, (g, w) in enumerate(zip(got, want)):
        dtype = dtypes[i // per_dtype]
        try:
            assert_close(g, np.asarray(w), **tolerance(dtype))
        except AssertionError as e:
            raise AssertionError(f"{name(dtype)}, output {i % per_dtype}: {e}") from None


def name(dtype) -> str:
    return np.dtype(dtype).name
