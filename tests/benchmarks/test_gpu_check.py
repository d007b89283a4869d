"""scripts/gpu-check without a GPU (issue 36): the graphs travel as skeletons whose weights regenerate to the same
bytes, the prepared folder fits a device call with the wheels the daemon needs beside the GPU machine's own jax, and
the check itself runs on the CPU platform against TensorFlow's outputs."""
import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from benchmarks.gpu import graphs, prepare, report, weights
from benchmarks.gpu.manifest import Manifest
from xlacs.v1 import tf_graph_pb2


@pytest.fixture(scope="module")
def lstm():
    return graphs.tf1_lstm()


def test_a_skeleton_fills_back_to_the_graph_tensorflow_ran(lstm):
    filled, scales = weights.regenerate(lstm.frozen.graph_def)
    assert list(scales) and all(s > 0 for s in scales.values())
    skeleton = weights.skeleton(filled, scales)
    assert len(skeleton) < len(filled) / 10
    assert weights.fill(skeleton, scales) == filled
    original = {n.name: n for n in tf_graph_pb2.GraphDef.FromString(lstm.frozen.graph_def).node}
    for node in tf_graph_pb2.GraphDef.FromString(filled).node:
        if node.name in scales:  # the same standard deviation, other values
            before = np.frombuffer(original[node.name].attr["value"].tensor.tensor_content, np.float32)
            after = np.frombuffer(node.attr["value"].tensor.tensor_content, np.float32)
            assert after.std() == pytest.approx(before.std(), rel=0.05) and not np.array_equal(after, before)


def test_regenerated_values_depend_on_the_name_alone():
    a = weights.uniform("conv/kernel", (64, 64), 0.5)
    assert a.dtype == np.float32 and np.abs(a).max() <= 0.5
    assert np.array_equal(a, weights.uniform("conv/kernel", (64, 64), 0.5))
    assert not np.array_equal(a, weights.uniform("conv/kernel_1", (64, 64), 0.5))
    with pytest.raises(ValueError, match="not the graph of these scales"):
        weights.fill(tf_graph_pb2.GraphDef().SerializeToString(), {"missing": 1.0})


def test_the_wheels_are_the_daemons_needs_but_the_gpu_machines_jax():
    names = prepare.daemon_distributions()
    assert {"grpcio", "protobuf", "fastapi", "uvicorn", "redis", "zstandard", "pydantic-core"} <= set(names)
    assert not set(names) & prepare.THEIRS


@pytest.fixture(scope="module")
def folder(tmp_path_factory, lstm):
    folder = tmp_path_factory.mktemp("gpu-check") / "prepared"
    prepare.prepare(folder, [lstm])
    return folder


def test_the_prepared_folder_fits_a_device_call_with_wheels_for_python_3_12(folder):
    manifest = Manifest.read(folder)
    assert [g.name for g in manifest.graphs] == ["LSTM-TF1"]
    wheels = {w.split("-")[0].lower().replace("_", "-"): w for w in manifest.wheels}
    assert set(wheels) == set(prepare.daemon_distributions())
    for wheel in wheels.values():
        tag = wheel.removesuffix(".whl").split("-")[-3:]
        assert tag[0] in ("py3", "cp312") or tag[1] == "abi3", wheel
        assert zipfile.ZipFile(folder / "wheels" / wheel).testzip() is None
    assert prepare.folder_bytes(folder) + prepare.tree_bytes() < prepare.CARRY_LIMIT


def test_the_check_runs_on_the_cpu_platform_and_matches_tensorflow(folder, tmp_path):
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "benchmarks.gpu.check", str(folder), "--platform", "cpu", "--out", str(out),
                    "--work", str(tmp_path / "work"), "--sections", "graphs"], check=True, timeout=600)
    result = json.loads((out / "gpu-report.json").read_text())
    rows = result["graphs"]
    assert rows["LSTM-TF1/b1"]["matches"] and rows["LSTM-TF1/b1"]["cache"] == "miss"
    assert all(b["matches"] for b in rows["SavedModel"]["batches"].values()) and len(rows["SavedModel"]["batches"]) == 2
    assert result["daemon_exit"] == 0
    rendered = report.render(result)
    assert "| LSTM-TF1/b1 |" in rendered and "Every graph matches TensorFlow: 3/3" in rendered
