"""A real browser on the dashboard while clients compile and execute real graphs on the same daemon."""
import pathlib
import re
import threading
import time

import grpc
import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import REFRESH_S, dense_graph, scale_graph, shoot
from xlacs_server.lower import registry



class Traffic(threading.Thread):
    """Compiles and executes a few graphs in a loop (bounded in count and time), plus one bad request."""

    def __init__(self, client, graphs, max_rounds=200, max_s=120.0):
        super().__init__(name="traffic", daemon=True)
        self.client, self.graphs, self.max_rounds, self.max_s = client, graphs, max_rounds, max_s
        self.stop = threading.Event()
        self.rounds = 0
        self.failure: BaseException | None = None

    def run(self):
        deadline = time.monotonic() + self.max_s
        try:
            with pytest.raises(grpc.RpcError):
                self.client.compile(self.graphs[0].frozen.graph_def, self.graphs[0].frozen.feeds, ["missing:0"])
            while not self.stop.is_set() and self.rounds < self.max_rounds and time.monotonic() < deadline:
                graph = self.graphs[self.rounds % len(self.graphs)]
                graph.compile(self.client).execute(graph.inputs())
                self.rounds += 1
                time.sleep(0.02)
        except BaseException as e:  # noqa: BLE001  (reported by the test thread)
            self.failure = e

    def finish(self):
        self.stop.set()
        self.join()
        assert self.failure is None, f"the traffic thread failed: {self.failure!r}"
        assert self.rounds > 0


def test_dashboard_in_a_browser_while_clients_compile(browser_page, dashboard, client, server):
    page, url = browser_page, dashboard.url
    dense = dense_graph(rows=4, prefix="browser")
    traffic = Traffic(client, [dense, scale_graph(6)])
    traffic.start()
    try:
        while traffic.rounds < 2 and traffic.is_alive():
            time.sleep(0.05)

        page.goto(f"{url}/")
        for device in server.service.devices.all:
            expect(page.locator(f"#devices tr[data-device='{device.name}']")).to_contain_text(device.kind)
        expect(page.locator("#rate-requests .value")).to_have_text(re.compile(r"\d+\.\d\d/s"))
        shoot(page, "overview")

        page.goto(f"{url}/ops")
        shown = page.locator("#ops tbody tr[data-op]").evaluate_all("rows => rows.map(r => r.dataset.op)")
        assert sorted(shown) == sorted(l.op for l in registry.registrations())
        expect(page.locator("#ops tr[data-op='MatMul'] .graphs")).not_to_have_text("0")
        expect(page.locator("#covered-count")).to_have_text(re.compile(r"[1-9]\d*"))
        shoot(page, "ops", full_page=False)  # the whole table is a few hundred rows
        page.fill("input[name=q]", "relu")  # filters as the person types, through the URL
        expected = sum("relu" in l.op.lower() or "relu" in l.module.lower() for l in registry.registrations())
        expect(page.locator("#ops tbody tr[data-op]")).to_have_count(expected)
        expect(page).to_have_url(re.compile(r"/ops\?q=relu$"))
        page.select_option("select[name=device]", "cpu")
        expect(page).to_have_url(re.compile(r"/ops\?q=relu&device=cpu$"))
        expect(page.locator("#coverage h2")).to_contain_text("on cpu")
        shoot(page, "ops-search")

        page.goto(f"{url}/executables")
        row = page.locator("#executables tr[data-executable]", has_text=dense.name)
        expect(row).to_have_count(1)
        expect(row.locator(".hits")).not_to_have_text("0")
        expect(row.locator(".tier")).to_have_text("optimized")  # a small program: compiled optimized at once
        shoot(page, "executables")
        row.locator("a").click()
        expect(page.locator("#passes tbody tr").first).to_be_visible()
        expect(page.locator("#op-histogram")).to_contain_text("MatMul")
        with page.expect_download() as download:
            page.click("#download-stablehlo")
        assert "stablehlo.dot_general" in pathlib.Path(download.value.path()).read_text()
        with page.expect_download() as download:
            page.click("#download-hlo")
        assert pathlib.Path(download.value.path()).read_text().startswith("HloModule")
        shoot(page, "executable")

        page.goto(f"{url}/errors")
        expect(page.locator("#errors tbody")).to_contain_text("INVALID_ARGUMENT")
        expect(page.locator("#errors tbody")).to_contain_text("missing")
        shoot(page, "errors")

        page.goto(f"{url}/cache")
        expect(page.locator("#hit-rate-chart g[data-tier='l1'] circle").first).to_be_attached()
    finally:
        traffic.finish()

    # With the traffic stopped, cause hits while the cache page stays open: it must show them by itself.
    hits = scale_graph(5)
    assert hits.compile(client).cache == "miss"
    for _ in range(3):
        assert hits.compile(client).cache == "l1"
    l1 = server.service.tiers.l1.stats
    expect(page.locator("#tiers tr[data-tier='l1'] .hits")).to_have_text(str(l1.hits), timeout=20 * REFRESH_S * 1000)
    expect(page.locator("#tiers tr[data-tier='l1'] .hit-rate")).to_have_text(
        f"{l1.hits / (l1.hits + l1.misses):.1%}")
    assert page.evaluate("document.body.dataset.refreshedAt"), "the page never refreshed itself"
    time.sleep(2 * REFRESH_S)  # let the chart take the sample with the last hits before the screenshot
    shoot(page, "cache")


def test_the_executables_page_lists_resident_tensors_and_drops_a_freed_one(browser_page, dashboard, client):
    page = browser_page
    graph = dense_graph(rows=5, prefix="resident")
    (kept,) = graph.compile(client).execute(graph.inputs(), keep=True, ttl_s=600)
    page.goto(f"{dashboard.url}/executables")
    row = page.locator("#resident tr[data-handle-prefix]").filter(
        has=page.locator("td", has_text=kept.name)).filter(has_text="float32[5,4]")
    expect(row).to_have_count(1)
    assert kept.handle.startswith(row.get_attribute("data-handle-prefix"))
    expect(row).to_contain_text("80 B")
    expect(row).to_contain_text(re.compile(r"\d+ min \d\d s"))
    shoot(page, "resident")
    assert kept.free()
    expect(row).to_have_count(0, timeout=20 * REFRESH_S * 1000)  # the live page drops it at a refresh
