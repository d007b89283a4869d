"""The benchmark suite's smallest measurements, run for a fraction of a second each against the session's
daemon: they run, the peers agree on the outputs, and the report renders what they measured."""
import numpy as np
import pytest

from benchmarks import execute_latency, goals, models, profiles, report, transport
from benchmarks.raw_grpc import RawGrpc
from xlacs_server.config import Settings
from xlacs_server.service import CompilationService


@pytest.fixture(scope="module")
def service():
    return CompilationService(Settings(cache_dir=""))


def test_every_peer_runs_the_tiny_add_and_agrees_with_tf_graph_mode(client, service):
    tiny = models.tiny_add()
    row = execute_latency.measure_model(client, service, tiny, built={}, seconds=0.2)
    measured = set(row["peers"]) | set(row["errors"])
    assert measured == set(execute_latency.PEERS) - {execute_latency.IN_PROCESS_EMBEDDED}
    assert {execute_latency.XLACS, execute_latency.IN_PROCESS, execute_latency.TF_GRAPH} <= set(row["peers"])
    for peer, error in row["max_relative_error_vs_tf_graph"].items():
        assert error < 1e-6, f"{peer} differs from TF graph mode by {error}"
    for summary in row["peers"].values():
        assert summary["n"] >= 5 and 0 < summary["p50_ms"] <= summary["p99_ms"]


def test_tiny_round_trip_and_transfer_render_as_goals(client, service):
    results = {"tiny": transport.tiny_round_trip(client, service, seconds=0.3)}
    raw = RawGrpc()
    try:
        results["transfer"] = transport.transfer(client, raw, [1], seconds=0.2)
    finally:
        raw.stop()
    assert set(results["transfer"]) == {"input 1 MB", "output 1 MB"}
    for peers in results["transfer"].values():
        assert peers[transport.RAW]["gb_per_s"] > 0 and peers[execute_latency.XLACS]["gb_per_s"] > 0
    by_key = {g.key: g for g in goals.evaluate(results)}
    assert by_key["tiny"].value == pytest.approx(results["tiny"][transport.TINY_XLACS]["p50_ms"] * 1e3)
    assert by_key["mobilenet"].passed is None and by_key["mobilenet"].verdict == "not measured"
    lines = report._tiny(results)
    assert any(line.startswith(f"| {transport.TINY_XLACS} |") for line in lines)
    assert any(line.startswith("| input 1 MB |") for line in report._transfer_table(results["transfer"]))


def test_goal_verdicts_say_by_how_much():
    slower = goals.Goal("x", "faster", 1, "×", value=1.25)
    assert (slower.passed, slower.verdict, slower.ratio_text) == (False, "**fail**: 25% over", "1.25× (≤ 1.00×)")
    assert goals.Goal("x", "faster", 1, "×", value=3).verdict == "**fail**: 3.0× the bound"
    assert goals.Goal("x", "faster", 1, "×", value=0.5).verdict == "**pass**"
    short = goals.Goal("t", "fast", 1, " GB/s", higher_is_better=True, value=0.25)
    assert (short.passed, short.verdict) == (False, "**fail**: 75% short")
    assert goals.Goal("l2", "cheap", 0.02, "%", value=0.01).ratio_text == "1.0% (≤ 2.0%)"


def test_py_spy_stacks_are_summarized_by_function():
    raw = ("_bootstrap (threading.py:1002);run (server/rpc/servicer.py:55);from_proto (client/tensors.py:30) 6\n"
           "_bootstrap (threading.py:1002);run (server/rpc/servicer.py:60);fill (client/tensors.py:17) 2\n"
           "_bootstrap (threading.py:1002);run (server/rpc/servicer.py:55);from_proto (client/tensors.py:31) 2\n")
    summary = profiles.summarize_raw(raw)
    assert summary["samples"] == 10
    assert summary["self_percent"] == [("from_proto (client/tensors.py)", 80.0), ("fill (client/tensors.py)", 20.0)]
    assert summary["inclusive_percent"][0] == ("run (server/rpc/servicer.py)", 100.0)
    assert all("threading.py" not in f for f, _ in summary["inclusive_percent"])


def test_copy_rates_are_measured():
    rates = transport.copy_rates(1 << 20, repeats=2)
    assert rates["fresh_pages_gb_per_s"] > 0 and rates["mapped_pages_gb_per_s"] > 0
    assert np.isfinite(list(rates.values())).all()
