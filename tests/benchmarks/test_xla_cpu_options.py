"""benchmarks/xla_cpu_options.py on the tiny Add: each option set compiles its own program, agrees with TF graph
mode run in its own process, and gets a median and a ratio to it; an option set XLA refuses stops the run."""
import pytest

from benchmarks import models
from benchmarks.peers import TF_GRAPH
from benchmarks.peers.remote import PeerProcess
from benchmarks.xla_cpu_options import measure, option_builds, option_set


@pytest.fixture(scope="module")
def tf_graph(tmp_path_factory):
    process = PeerProcess(TF_GRAPH, tmp_path_factory.mktemp("tf"))
    yield process
    process.stop()


def test_option_sets_spell_values_with_commas():
    assert option_set("ynn=xla_cpu_experimental_ynn_fusion_type=A,B;xla_cpu_use_onednn=true") == (
        "ynn", ("xla_cpu_experimental_ynn_fusion_type=A,B", "xla_cpu_use_onednn=true"))
    assert option_set("default=") == ("default", ())


def test_each_option_set_is_timed_against_tf_graph_mode(tf_graph, tmp_path):
    result = measure(models.tiny_add(), tmp_path, tf_graph,
                     option_builds({"default": (), "eigen": ("xla_cpu_experimental_ynn_fusion_type=",)}), rounds=2,
                     seconds=0.05)
    assert result[TF_GRAPH]["p50_ms"] > 0
    for name in ("default", "eigen"):
        assert result[name]["error"] < 1e-6
        assert result[name]["vs_tf_graph"] == pytest.approx(result[name]["p50_ms"] / result[TF_GRAPH]["p50_ms"])


def test_an_option_xla_refuses_stops_the_run(tf_graph, tmp_path):
    with pytest.raises(ValueError, match="xla_cpu_no_such_option"):
        measure(models.tiny_add(), tmp_path, tf_graph, option_builds({"bad": ("xla_cpu_no_such_option=true",)}), rounds=1,
                seconds=0.01)
