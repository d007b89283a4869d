"""SavedModel directories through a live daemon, from the client and from `xlacs run`/`xlacs compile`:
inputs and outputs by their signature names, matching the outputs of the SavedModel TensorFlow loads."""
import json
import re

import numpy as np
import pytest

from tests.client.test_cli import xlacs
from tests.oracle import assert_close
from tests.saved_model.models import random_inputs, saved, tf_outputs
from xlacs import Client
from xlacs.saved_model import InvalidInput, SavedModel


def _compare(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        assert np.std(value) > 1e-3, name  # not a vanished activation (TESTING.md)
        assert_close(got[name], value)


def test_module_signatures_by_name(client):
    directory = saved("affine")
    executable = client.compile_saved_model(directory, shapes={"x": (3, 4)})
    x = random_inputs(SavedModel(directory).signature(), batch=3)["x"]
    got = executable(x=x)
    _compare(got, tf_outputs(directory, "serving_default", {"x": x}))
    shift = client.compile_saved_model(directory, "shift")
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    _compare(shift.execute({"v": v}), tf_outputs(directory, "shift", {"v": v}))
    assert list(shift.inputs) == ["v"] and shift.inputs["v"].shape == (2, 3)


def test_embedding_lookup(client):
    directory = saved("lookup")
    ids = np.array([[0, 3, 9], [1, 1, 2]], np.int32)
    got = client.compile_saved_model(directory)(ids=ids)
    _compare(got, tf_outputs(directory, "serving_default", {"ids": ids}))


@pytest.mark.parametrize("saver", ["save", "export"])
def test_two_named_inputs_and_a_dict_of_outputs(client, saver):
    directory = saved(f"two_io_{saver}")
    inputs = random_inputs(SavedModel(directory).signature(), batch=3, seed=1)
    executable = client.compile_saved_model(directory, shapes={n: a.shape for n, a in inputs.items()})
    assert sorted(executable.outputs) == ["embedding", "score"]
    _compare(executable.execute(inputs), tf_outputs(directory, "serving_default", inputs))


@pytest.mark.parametrize("saver", ["save", "export"])
def test_mobilenet_v2(client, saver):
    directory = saved(f"mobilenet_v2_{saver}")
    signature = SavedModel(directory).signature()
    inputs = random_inputs(signature, batch=1, seed=2)
    executable = client.compile_saved_model(directory, shapes={n: a.shape for n, a in inputs.items()})
    _compare(executable.execute(inputs), tf_outputs(directory, "serving_default", inputs))


def test_cli_run_keeps_names_shapes_and_dtypes(server, tmp_path):
    directory = saved("two_io_export")
    inputs = random_inputs(SavedModel(directory).signature("serve"), batch=2, seed=3)
    args = []
    for name, array in inputs.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / name}.npy"]
    record = json.loads(xlacs("run", str(directory), "--signature", "serve", *args, "--out", str(tmp_path / "out"),
                              server=server).stdout)
    assert record["signature"] == "serve"
    # Compiled with the signature's unknown batch (shape buckets); the outputs have the inputs' batch.
    assert record["inputs"] == {"a": {"dtype": "float32", "shape": [-1, 6]}, "b": {"dtype": "float32", "shape": [-1, 3]}}
    assert {n: (o["dtype"], o["shape"]) for n, o in record["outputs"].items()} == {
        "score": ("float32", [2, 2]), "embedding": ("float32", [2, 4])}
    assert record["execute_ms"] > 0
    _compare({n: np.load(o["path"]) for n, o in record["outputs"].items()}, tf_outputs(directory, "serve", inputs))


def test_cli_compile_takes_shapes_by_input_name(server):
    record = json.loads(xlacs("compile", str(saved("affine") / "saved_model.pb"), "--feed", "x=float32[5,4]",
                              server=server).stdout)
    assert record["inputs"] == {"x": {"dtype": "float32", "shape": [5, 4]}}
    assert sorted(record["outputs"]) == ["total", "y"] and record["executable_id"]


@pytest.mark.parametrize("inputs, message", [
    ({"a": np.zeros((2, 6), np.float32)}, r"missing input\(s\) 'b': signature 'serving_default' takes a: "
                                          r"float32\[2, 6\], b: float32\[2, 3\]"),
    ({"a": np.zeros((2, 6), np.float32), "b": np.zeros((2, 3), np.float32), "c": np.zeros(1)},
     r"unknown input\(s\) 'c'"),
    ({"a": np.zeros((2, 6), np.float64), "b": np.zeros((2, 3), np.float32)},
     r"input 'a' is float64; signature 'serving_default' expects float32\[2, 6\]"),
    ({"a": np.zeros((2, 6, 1), np.float32), "b": np.zeros((2, 3), np.float32)},
     r"input 'a' has shape \[2, 6, 1\]; signature 'serving_default' expects float32\[2, 6\]"),
])
def test_bad_inputs_name_the_input_and_the_signature(client, inputs, message):
    executable = client.compile_saved_model(saved("two_io_export"), shapes={"a": (2, 6), "b": (2, 3)})
    with pytest.raises(InvalidInput, match=message):
        executable.execute(inputs)


def test_cli_errors(server, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((2, 4), np.int32))
    run = ["run", str(saved("affine")), "--out", str(tmp_path / "out")]
    cases = [
        (run + ["--input", f"x={tmp_path / 'x.npy'}"], r"input 'x' is int32"),
        (run + ["--input", f"q={tmp_path / 'x.npy'}"], r"missing input\(s\) 'x'; unknown input\(s\) 'q'"),
        (["compile", str(saved("affine")), "--signature", "nope"], r"no signature 'nope'.*'serving_default'"),
        (["compile", str(tmp_path)], "has no saved_model.pb"),
        (["compile", str(tmp_path / "absent.pb"), "--feed", "x:0=float32[1]", "--fetch", "y:0"],
         "absent.pb: No such file or directory"),
    ]
    for args, message in cases:
        result = xlacs(*args, server=server, check=False)
        assert result.returncode == 2, result.stdout + result.stderr
        error = json.loads(result.stdout)["error"]
        assert error["code"] == "INVALID_ARGUMENT"
        assert re.search(message, error["message"]), error["message"]


def test_the_same_weights_are_not_sent_twice(fresh_server):
    """MobileNetV2 written by tf.saved_model.save and by model.export() freezes into two graphs with the same
    weight tensors: the second compile uploads its skeleton only."""
    with Client(fresh_server.address, timeout=600) as client:
        first = client.compile_saved_model(saved("mobilenet_v2_save")).upload
        second = client.compile_saved_model(saved("mobilenet_v2_export")).upload
    assert first.uploaded_bytes > 10e6 and first.skipped_bytes == 0
    assert second.skipped_bytes >= 0.95 * first.uploaded_bytes
    assert second.uploaded_bytes < 0.05 * first.uploaded_bytes
