"""The `xlacs` command against a live daemon, as a user runs it (a subprocess)."""
import json
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from tests.cache.conftest import deep_graph
from tests.models.keras_models import frozen_keras
from tests.oracle import assert_close
from tests.rpc.test_errors import add_graph, graph_def

XLACS = [sys.executable, "-m", "xlacs.cli"]


def xlacs(*args, server, check=True) -> subprocess.CompletedProcess:
    result = subprocess.run([*XLACS, *args, "--server", server.address, "--json"], capture_output=True, text=True,
                            timeout=600)
    if check:
        assert result.returncode == 0, result.stderr + result.stdout
    return result


@pytest.fixture
def add_pb(tmp_path) -> pathlib.Path:
    path = tmp_path / "add.pb"
    path.write_bytes(add_graph())
    return path


def test_compile_wait_optimized_answers_with_the_optimized_program(server, tmp_path):
    graph = deep_graph(21, layers=50)  # a program of its own, over the default tiered_min_ops
    path = tmp_path / "deep.pb"
    path.write_bytes(graph.frozen.graph_def)
    (feed, (_, shape)), = graph.frozen.feeds.items()
    args = ("compile", str(path), "--feed", f"{feed}=float32[{','.join(map(str, shape))}]", "--fetch",
            graph.frozen.fetches[0])
    record = json.loads(xlacs(*args, "--wait-optimized", server=server).stdout)
    assert (record["cache"], record["tier"]) == ("miss", "optimized") and "tier_up" in record["stage_ms"]


def test_compile_json_reports_cache_tier_and_stages(server, add_pb):
    first = json.loads(xlacs("compile", str(add_pb), "--feed", "x:0=float32[2,3]", "--fetch", "y:0",
                             server=server).stdout)
    again = json.loads(xlacs("compile", str(add_pb), "--feed", "x:0=float32[2,3]", "--fetch", "y:0",
                             server=server).stdout)
    assert first["executable_id"] == again["executable_id"] and re.fullmatch(r"[0-9a-f]{40}", first["executable_id"])
    assert again["cache"] == "l1" and first["cache"] in ("miss", "l1")
    assert {"parse", "key"} <= set(first["stage_ms"])
    # The second compile names the graph by digest, and the daemon has it: nothing of the graph is sent.
    assert again["upload"] == {"uploaded_blobs": 0, "uploaded_bytes": 0, "skipped_blobs": 1,
                               "skipped_bytes": add_pb.stat().st_size, "sent_whole": False}


def test_run_mobilenet_v2_writes_tf_outputs(server, tmp_path):
    frozen, model = frozen_keras("MobileNetV2", (1, 224, 224, 3))
    graph = tmp_path / "mobilenet_v2.pb"
    graph.write_bytes(frozen.graph_def)
    x = np.random.default_rng(2).uniform(-1, 1, (1, 224, 224, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    (feed,), (fetch,) = frozen.feeds, frozen.fetches
    record = json.loads(xlacs("run", str(graph), "--input", f"{feed}={tmp_path / 'x.npy'}", "--fetch", fetch,
                              "--out", str(tmp_path / "out"), server=server).stdout)
    got = np.load(record["outputs"][fetch]["path"])
    assert_close(got, model(x, training=False).numpy())


def test_ops_lists_registrations(server):
    ops = {o["op"]: o for o in json.loads(xlacs("ops", server=server).stdout)["ops"]}
    assert "Conv2D" in ops and "cpu" in ops["Conv2D"]["devices"]
    assert ops["Reshape"]["constant_inputs"] == ["shape"]


def test_check_exits_non_zero_on_unsupported_ops(server, tmp_path, add_pb):
    import tensorflow as tf

    def build():
        s = tf.compat.v1.placeholder(tf.string, [2], name="s")
        tf.strings.length(s, name="length")
    bad = tmp_path / "strings.pb"
    bad.write_bytes(graph_def(build))
    result = xlacs("check", str(bad), server=server, check=False)
    report = json.loads(result.stdout)
    assert result.returncode != 0 and report["unsupported"] == {"StringLength": ["length"]}
    assert report["op_histogram"] == {"Placeholder": 1, "StringLength": 1}
    ok = json.loads(xlacs("check", str(add_pb), server=server).stdout)
    assert ok["unsupported"] == {} and ok["node_count"] == 4


def test_errors_are_reported_as_json(server, add_pb):
    result = xlacs("compile", str(add_pb), "--feed", "x:0=float32[2,3]", "--fetch", "nope:0", server=server,
                   check=False)
    assert result.returncode != 0
    assert json.loads(result.stdout)["error"]["code"] == "INVALID_ARGUMENT"


def test_bad_feed_syntax_is_a_usage_error(server, add_pb):
    result = xlacs("compile", str(add_pb), "--feed", "x:0=float32", "--fetch", "y:0", server=server, check=False)
    assert result.returncode == 2 and "NAME=DTYPE[d0,d1,...]" in result.stderr


def test_compile_dump_graphs_writes_each_pass(server, add_pb, tmp_path):
    out = tmp_path / "dumps"
    xlacs("compile", str(add_pb), "--feed", "x:0=float32[2,3]", "--fetch", "y:0", "--dump-graphs", str(out),
          server=server)
    names = sorted(p.name for p in out.iterdir())
    assert names[0] == "00_prune.pbtxt" and any("infer_shapes" in n for n in names)
    last = (out / names[-1]).read_text()
    assert 'op: "AddV2"' in last and "_output_shapes" in last
