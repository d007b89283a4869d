"""The training step benchmark (benchmarks/training.py) for a fraction of a second against the session's daemon:
xlacs on a state and both TF runners start from the same weights and agree on the first loss, and the report
renders the figures."""
from benchmarks import report, training


def test_training_step_is_timed_beside_tf_graph_and_tf_xla_and_rendered(client):
    measured = training.measure(client, ["Adam"], seconds=0.3)
    adam = measured["by_optimizer"]["Adam"]
    for runner in ("xlacs", "TF graph mode", "TF XLA"):
        assert adam[runner]["n"] >= 10 and 0 < adam[runner]["p50_ms"] <= adam[runner]["p99_ms"]
    assert adam["xlacs_over_tf_xla"] == adam["xlacs"]["p50_ms"] / adam["TF XLA"]["p50_ms"]
    assert adam["state_bytes"] > 3 * 4 * (784 * 512 + 512 * 512)  # the weights and Adam's two slots
    assert client.stats().states == 0  # the benchmark deletes its state
    lines = report._training({"training": measured})
    assert lines[0] == "## Training step (ms)"
    assert any(line.startswith("| Adam |") for line in lines)
