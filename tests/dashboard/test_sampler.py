"""The sampled history's arithmetic: rates, per-interval hit rates with gaps, and the chart drawn from them."""
import dataclasses
import time

import pytest

from xlacs_server.cache.stats import TierStats
from xlacs_server.dashboard import charts, models
from xlacs_server.dashboard.sampler import Sample, Sampler, hit_rates, rate


def sample(t: float, requests: int = 0, **tiers: tuple[int, int]) -> Sample:
    return Sample(t, requests, 0, 0, 0, {name: TierStats(name, hits=h, misses=m) for name, (h, m) in tiers.items()})


def test_rate_is_the_counter_slope_over_the_window():
    history = [sample(0, 0), sample(50, 10), sample(90, 40)]
    assert rate(history, sample(100, 100), "requests", window_s=60) == pytest.approx((100 - 10) / 50)
    assert rate([], sample(100, 100), "requests", window_s=60) is None


def test_hit_rates_per_interval_leave_gaps_without_lookups():
    history = [sample(0, l1=(0, 0)), sample(1, l1=(3, 1)), sample(2, l1=(3, 1)), sample(3, l1=(5, 1), l2=(0, 1))]
    assert hit_rates(history, "l1") == [(1, 0.75, 4), (2, None, 0), (3, 1.0, 2)]
    assert hit_rates(history, "l2") == []  # a tier that appeared in the last sample has no interval yet


def test_the_chart_breaks_its_line_at_gaps_and_spans_the_history():
    points = [models.HitRatePoint(time_unix=t, hit_rate=r, lookups=1) for t, r in
              [(10, 0.5), (11, 1.0), (12, None), (13, 0.0)]]
    chart = charts.hit_rate_chart([models.TierHistory(tier="l1", points=points)], interval_s=1)
    (series,) = chart.series
    assert len(series.lines) == 2 and len(series.dots) == 3
    xs = [x for x, _ in series.dots]
    assert xs[0] == chart.plot_left and xs[-1] == chart.plot_right
    ys = [y for _, y in series.dots]
    assert ys[1] < ys[0] < ys[2]  # 100% is drawn above 50%, which is above 0%


def test_the_sampler_copies_tier_stats_in_the_background():
    @dataclasses.dataclass
    class Tier:
        tier: str
        stats: TierStats

    @dataclasses.dataclass
    class Counters:
        requests: int = 0
        errors: int = 0
        compiles: int = 0
        executes: int = 0

    @dataclasses.dataclass
    class Service:
        tiers: list
        counters: Counters

    service = Service([Tier("l1", TierStats("l1"))], Counters())
    sampler = Sampler(service, interval_s=0.01)
    sampler.start()
    service.tiers[0].stats.hits = 7
    deadline = time.monotonic() + 10
    try:
        while not sampler.history() or sampler.history()[-1].tiers["l1"].hits != 7:
            assert time.monotonic() < deadline, "the sampler took no sample"
            time.sleep(0.005)
    finally:
        sampler.stop()
    assert sampler.history()[0].tiers["l1"].hits == 0  # a copy, not the live object
