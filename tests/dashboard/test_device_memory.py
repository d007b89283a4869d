"""Device memory on the dashboard: each device's budget (max_device_bytes) and the bytes of weights, resident tensors
and variable states counted against it, beside what PJRT (or, for the CPU, the host) reports, on the overview page
followed live in a real browser, in its JSON twin and in the Prometheus gauges."""
import numpy as np
from playwright.sync_api import expect

from tests.dashboard.conftest import REFRESH_S, shoot
from tests.dashboard.test_api import metric_samples
from xlacs_server.dashboard.app import _bytes

STATE = {"v": np.zeros(1000, np.float32)}  # 4000 bytes


def device_row(http, name: str = "cpu:0") -> dict:
    (row,) = [d for d in http.get("/api/overview").json()["devices"] if d["name"] == name]
    return row


def test_the_overview_shows_each_device_s_budget_and_what_counts_against_it(browser_page, dashboard, http, client,
                                                                               server):
    budget = server.service.budget
    before = device_row(http)
    assert before["budget_bytes"] == budget.limits["cpu:0"] > 0
    assert before["memory_source"] == "host" and before["memory_used_bytes"] > 0
    assert before["memory_peak_bytes"] is None  # PJRT reports no peak for the CPU
    page = browser_page
    page.goto(f"{dashboard.url}/")
    listed = page.locator("#devices tr[data-device='cpu:0']")
    expect(listed.locator(".budget")).to_contain_text(f"of {_bytes(before['budget_bytes'])}")

    with client.create_state(STATE):
        row = device_row(http)
        assert row["budget_state_bytes"] == before["budget_state_bytes"] + 4000
        assert (row["budget_weights_bytes"], row["budget_resident_bytes"], row["budget_state_bytes"]) == \
            tuple(budget.used("cpu:0").values())
        samples = metric_samples(http)
        assert samples[("xlacs_device_budget_bytes", frozenset({"device": "cpu:0"}.items()))] == row["budget_bytes"]
        for kind, field in (("weights", "budget_weights_bytes"), ("resident", "budget_resident_bytes"),
                            ("states", "budget_state_bytes")):
            counted = ("xlacs_device_budget_used_bytes", frozenset({"device": "cpu:0", "kind": kind}.items()))
            assert samples[counted] == row[field]
        expect(listed.locator(".states")).to_have_text(_bytes(row["budget_state_bytes"]),
                                                       timeout=20 * REFRESH_S * 1000)  # at a refresh
        shoot(page, "device_memory")
    expect(listed.locator(".states")).to_have_text(_bytes(before["budget_state_bytes"]),
                                                   timeout=20 * REFRESH_S * 1000)
