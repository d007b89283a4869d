"""Issue 17's run-local goal: the Transformer block downloaded and run in the client's process, per call, against
tf2jax in-process; a miss is explained from the run's own figures."""
import pytest

from benchmarks import goals, peers


def results(local_ms: float) -> dict:
    p50 = {peers.XLACS_LOCAL: local_ms, peers.TF2JAX: 0.1, peers.XLACS: 0.7, peers.IN_PROCESS: 0.11}
    return {"execute": {goals.LOCAL_MODEL: {"peers": {peer: {"p50_ms": ms} for peer, ms in p50.items()}}}}


def test_the_goal_is_run_local_over_tf2jax():
    met = {g.key: g for g in goals.evaluate(results(0.12))}["local"]
    assert (met.subject, met.value, met.passed) == (goals.LOCAL_MODEL, pytest.approx(1.2), True)
    missed = {g.key: g for g in goals.evaluate(results(0.2))}["local"]
    assert (missed.value, missed.passed) == (pytest.approx(2.0), False)
    assert "0.200 ms against 0.100 ms (p50)" == missed.measured


def test_a_miss_says_what_the_daemon_and_the_program_alone_take():
    text = "\n".join(goals.analysis(results(0.2)))
    assert "Through the daemon the call takes 0.700 ms" in text and "(in-process JAX) takes 0.110 ms" in text


def test_not_measured_without_the_row():
    goal = {g.key: g for g in goals.evaluate({})}["local"]
    assert goal.passed is None and goal.verdict == "not measured"
