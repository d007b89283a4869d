"""ModelStatistics on its own: exact counts under many threads, Triton's message, the Prometheus series and when
they go. Real infers through served models are in test_statistics_served.py."""
import itertools
import threading

from google.protobuf import json_format
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from xlacs_server import metrics
from xlacs_server.execute.executable import RunTimes
from xlacs_server.inference.v2 import grpc_service_pb2
from xlacs_server.models.statistics import RECENT, ModelStatistics

_names = itertools.count()


def fresh(version: str = "1") -> ModelStatistics:
    """Statistics of a model name no other test uses: the series live in the process's registry."""
    return ModelStatistics(f"stats_model_{next(_names)}", version)


def series(name: str, version: str) -> dict[str, float]:
    """The model version's samples in the /metrics text, by sample name (histogram buckets by their le too)."""
    found = {}
    for family in text_string_to_metric_families(generate_latest(metrics.CORE).decode()):
        for s in family.samples:
            if s.labels.get("model") == name and s.labels.get("version") == version:
                found[s.name + (f"{{le={s.labels['le']}}}" if "le" in s.labels else "")] = s.value
    return found


RUN = RunTimes(input_s=0.0005, infer_s=0.001, output_s=0.0005)  # 2 ms in all


def test_counts_are_exact_under_many_threads():
    stats, threads, rounds = fresh(), 8, 400
    start = threading.Barrier(threads)

    def work(index):
        start.wait(timeout=30)
        for _ in range(rounds):
            stats.success(0.001, RUN)
            stats.execution(index + 1, RUN)
            stats.failure(0.004, f"failure of thread {index}")

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
        assert not w.is_alive()

    s = stats.snapshot()
    n = threads * rounds
    assert s["inference_stats"]["success"] == {"count": n, "ns": n * 3_000_000}
    assert s["inference_stats"]["queue"] == {"count": n, "ns": n * 1_000_000}
    assert s["inference_stats"]["compute_input"] == {"count": n, "ns": n * 500_000}
    assert s["inference_stats"]["compute_infer"] == {"count": n, "ns": n * 1_000_000}
    assert s["inference_stats"]["compute_output"] == {"count": n, "ns": n * 500_000}
    assert s["inference_stats"]["fail"] == {"count": n, "ns": n * 4_000_000}
    assert s["execution_count"] == n
    assert s["inference_count"] == rounds * sum(range(1, threads + 1))  # rows, as Triton counts inferences
    assert [(b["batch_size"], b["compute_infer"]["count"]) for b in s["batch_stats"]] == [
        (size, rounds) for size in range(1, threads + 1)]
    assert stats.last_error.startswith("failure of thread ")
    got = series(stats.name, stats.version)
    assert got["xlacs_model_requests_total"] == n
    assert got["xlacs_model_failures_total"] == n
    assert got["xlacs_model_batch_size_count"] == n
    assert got["xlacs_model_batch_size_sum"] == rounds * sum(range(1, threads + 1))
    assert got["xlacs_model_queue_seconds_count"] == got["xlacs_model_compute_seconds_count"] == n
    stats.close()


def test_snapshot_is_triton_model_statistics():
    stats = fresh("3")
    stats.success(0.5, RunTimes(infer_s=0.25))
    stats.execution(4, RunTimes(infer_s=0.25))
    stats.execution(4, RunTimes(input_s=0.125, infer_s=0.5, output_s=0.125))
    message = json_format.ParseDict(stats.snapshot(), grpc_service_pb2.ModelStatistics())
    assert (message.name, message.version) == (stats.name, "3")
    assert message.inference_count == 8 and message.execution_count == 2
    assert message.inference_stats.success.ns == 750_000_000
    assert message.inference_stats.queue.ns == 500_000_000
    assert [(b.batch_size, b.compute_infer.count, b.compute_infer.ns, b.compute_input.ns, b.compute_output.ns)
            for b in message.batch_stats] == [(4, 2, 750_000_000, 125_000_000, 125_000_000)]
    assert message.last_inference > 0
    stats.close()


def test_latency_quantiles_cover_the_recent_requests():
    stats = fresh()
    assert stats.latency_quantiles() is None
    for ms in range(1, 1001):  # 1 .. 1000 ms: p50 ~ 500 ms, p99 ~ 990 ms
        stats.success(0.0, RunTimes(infer_s=ms / 1e3))
    q = stats.latency_quantiles()
    assert abs(q["p50"] - 0.5005) < 1e-9 and abs(q["p99"] - 0.99001) < 1e-9
    for _ in range(RECENT):  # older requests leave the window
        stats.success(0.0, RunTimes(infer_s=0.002))
    assert stats.latency_quantiles() == {"p50": 0.002, "p99": 0.002}
    stats.close()


def test_close_drops_the_series_and_a_reload_keeps_them_until_its_last_holder_closes():
    old = fresh("2")
    old.success(0.0, RunTimes(infer_s=0.001))
    assert series(old.name, "2")["xlacs_model_requests_total"] == 1
    reloaded = ModelStatistics(old.name, "2")  # the same version loaded again while the old one drains
    reloaded.success(0.0, RunTimes(infer_s=0.001))
    assert reloaded.snapshot()["inference_stats"]["success"]["count"] == 1  # Triton's counts are the load's own
    old.close()
    old.close()  # idempotent: does not take the reloaded one's hold
    assert series(old.name, "2")["xlacs_model_requests_total"] == 2
    reloaded.close()
    assert series(old.name, "2") == {}
