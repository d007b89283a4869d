"""Variable states on the dashboard (docs/training.md): the executables page lists each state, followed live in a
real browser as steps run, with its JSON twin and the Prometheus gauges; a deleted state goes."""
import numpy as np
from playwright.sync_api import expect

from tests.dashboard.conftest import REFRESH_S, shoot
from tests.dashboard.test_api import metric_samples
from tests.training.test_states import compile_accumulator, values


def state_rows(http, state) -> list[dict]:
    return [s for s in http.get("/api/executables").json()["states"] if state.id.startswith(s["id_prefix"])]


def test_states_are_listed_live_with_their_gauges_and_go_when_deleted(browser_page, dashboard, http, client):
    executable = compile_accumulator(client, shape=(3, 5))
    state = client.create_state(values(shape=(3, 5)))
    try:
        (row,) = state_rows(http, state)
        assert state.id not in http.get("/api/executables").text  # an id lets anyone read the model: never shown
        assert (row["device"], row["variables"], row["bytes"], row["steps"]) == ("cpu:0", 2, 120, 0)
        samples, stats = metric_samples(http), client.stats()
        assert samples[("xlacs_states", frozenset())] == stats.states >= 1
        assert samples[("xlacs_state_bytes", frozenset())] == stats.state_bytes >= 120

        page = browser_page
        page.goto(f"{dashboard.url}/executables")
        listed = page.locator(f'#states tr[data-state-prefix="{row["id_prefix"]}"]')
        expect(listed).to_have_count(1)
        expect(listed).to_contain_text("120 B")
        expect(listed.locator(".steps")).to_have_text("0")
        for _ in range(3):
            executable(np.ones((3, 5), np.float32), state=state)
        expect(listed.locator(".steps")).to_have_text("3", timeout=20 * REFRESH_S * 1000)  # at a refresh
        assert state_rows(http, state)[0]["steps"] == 3
        shoot(page, "states")
    finally:
        assert state.delete() == 120
    assert state_rows(http, state) == []
    expect(listed).to_have_count(0, timeout=20 * REFRESH_S * 1000)
