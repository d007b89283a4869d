"""The TF Serving benchmark (benchmarks/tfserving.py) for a few requests: both APIs timed in process and from the
official clients, the ratio of their medians, and the report's section renders the figures."""
from benchmarks import report, tfserving


def test_predict_and_model_infer_are_timed_both_ways_and_rendered(tmp_path):
    measured = tfserving.measure(tmp_path, requests=5, rounds=1)
    for way in ("in_process", "round_trip"):
        for api in ("predict", "model_infer"):
            (p50,), (p90,) = measured[way][api]["p50_ms"], measured[way][api]["p90_ms"]
            assert 0 < p50 <= p90
        p50s = [measured[way][api]["p50_ms"][0] for api in ("predict", "model_infer")]
        assert abs(measured[way]["ratio"] - p50s[0] / p50s[1]) < 1e-9
    lines = report._tfserving({"tfserving": measured})
    assert lines[0] == "## TF Serving's Predict beside ModelInfer (ms)"
    assert sum(line.startswith("| TF Serving's") or line.startswith("| the Open") for line in lines) == 4
