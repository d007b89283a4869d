"""Strings and quantized dtypes are refused by the client before any RPC, naming the feed or input and saying why:
Client.compile, compile_function, Execute inputs, and the CLI's --feed."""
import re

import numpy as np
import pytest
import tensorflow as tf

from tests.client.test_cli import xlacs
from tests.rpc.test_errors import add_graph
from xlacs.dtypes import UnsupportedDType

QUANTIZED = re.escape("quantized dtypes are not supported by xlacs; dequantize to float32 first "
                      "(tf.quantization.dequantize)")
STRING = "xlacs compiles numeric tensors only"
SPELLINGS = [  # (dtype as a user gives it, its name in the message, why)
    *[(d, "qint8", QUANTIZED) for d in (tf.qint8, "qint8", "DT_QINT8", tf.qint8.as_numpy_dtype)],
    (tf.quint8, "quint8", QUANTIZED), ("quint8", "quint8", QUANTIZED), (tf.qint32, "qint32", QUANTIZED),
    *[(d, "string", STRING) for d in (tf.string, "string", "DT_STRING", object, np.str_, np.bytes_)],
]


@pytest.mark.parametrize("dtype, name, why", SPELLINGS, ids=[repr(s[0]) for s in SPELLINGS])
def test_compile_names_the_feed_and_why(client, dtype, name, why):
    with pytest.raises(UnsupportedDType, match=f"^feed 'x:0' has dtype {name}: {why}$"):
        client.compile(add_graph(), {"x:0": (dtype, (2, 3))}, ["y:0"])


@pytest.mark.parametrize("spec, feed, why", [
    (tf.TensorSpec([2], tf.string, name="s"), "s:0", f"dtype string: {STRING}"),
    (tf.TensorSpec([2], tf.qint8, name="q"), "q:0", f"dtype qint8: {QUANTIZED}"),
], ids=["string", "qint8"])
def test_compile_function_names_the_input_and_why(client, spec, feed, why):
    @tf.function
    def fn(t):
        return tf.strings.length(t) if t.dtype == tf.string else tf.quantization.dequantize(t, 0.0, 1.0)

    with pytest.raises(UnsupportedDType, match=f"^feed '{feed}' has {why}$"):
        client.compile_function(fn, spec)


@pytest.mark.parametrize("array, why", [
    (np.array([["a", "b", "c"]] * 2), f"dtype string: {STRING}"),
    (np.array([[b"a", b"b", b"c"]] * 2, dtype=object), f"dtype string: {STRING}"),
    (np.zeros((2, 3), tf.qint8.as_numpy_dtype), f"dtype qint8: {QUANTIZED}"),
], ids=["str", "bytes", "qint8"])
def test_execute_names_the_input_and_why(client, array, why):
    executable = client.compile(add_graph(), {"x:0": ("float32", (2, 3))}, ["y:0"])
    with pytest.raises(UnsupportedDType, match=f"^input 'x:0' has {why}$"):
        executable.execute({"x:0": array})


@pytest.mark.parametrize("feed, why", [("x:0=qint8[2,3]", f"dtype qint8: {QUANTIZED}"),
                                       ("x:0=string[]", f"dtype string: {STRING}")], ids=["qint8", "string"])
def test_cli_feed_names_the_feed_and_why(server, tmp_path, feed, why):
    (tmp_path / "add.pb").write_bytes(add_graph())
    result = xlacs("compile", str(tmp_path / "add.pb"), "--feed", feed, "--fetch", "y:0", server=server, check=False)
    assert result.returncode == 2 and re.search(f"argument --feed: feed 'x:0' has {why}$", result.stderr, re.M)
