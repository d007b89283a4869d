"""The models page in a real browser, on a real daemon serving a model repository while requests come in."""
import re

import httpx
import numpy as np
import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import shoot
from tests.model_repository import ModelServer, failing_model, graphdef_model
from xlacs_server.errors import InvalidRequest
from xlacs_server.models.served_signature import Background


def row(page, model: str, version: str):
    return page.locator(f"#models tr:not(.problem)[data-model='{model}'][data-version='{version}']")


def test_the_models_page_follows_requests_failures_and_an_unload(browser_page, tmp_path):
    page = browser_page
    built = graphdef_model(tmp_path, "page_gd")  # max_batch_size 8
    static = graphdef_model(tmp_path, "page_static", max_batch_size=0)
    broken = failing_model(tmp_path, "page_broken")
    with ModelServer(tmp_path) as server:
        url = f"http://{server.http_address}"
        page.goto(f"{url}/models")
        expect(page.locator("nav a[aria-current='page']")).to_have_text("Models")
        expect(row(page, built.name, "1").locator(".state")).to_have_text("READY")
        expect(row(page, static.name, "1").locator(".state")).to_have_text("READY")
        expect(row(page, broken, "1").locator(".state")).to_have_text("UNAVAILABLE")
        reason = server.models.model(broken, "1").reason
        assert reason
        expect(page.locator(f"tr.problem[data-model='{broken}'] .reason")).to_contain_text(reason[:60])
        expect(row(page, built.name, "1").locator(".requests")).to_have_text("0")
        expect(page.locator("#no-batches")).to_be_visible()

        served = server.models.model(built.name, "1")
        for seed, batch in enumerate((2, 2, 5)):
            served.infer(built.inputs(batch=batch, seed=seed), None, Background())
        with pytest.raises(InvalidRequest):
            served.infer({"x": np.zeros((2, 7), np.float32)}, None, Background())

        # The page refreshes itself: no reload
        expect(row(page, built.name, "1").locator(".requests")).to_have_text("3")
        expect(row(page, built.name, "1").locator(".failures")).to_have_text("1")
        expect(row(page, built.name, "1").locator(".p50")).to_have_text(re.compile(r"^\d+\.\d\d ms$"))
        expect(row(page, built.name, "1").locator(".compute")).to_have_text(re.compile(r"^\d+\.\d\d ms$"))
        expect(page.locator(f"tr.problem[data-model='{built.name}'] .last-error")).to_contain_text("'x'")
        figure = page.locator(f"figure.batch-sizes[data-model='{built.name}'][data-version='1']")
        expect(figure.locator("tr[data-batch-size='2'] .executions")).to_have_text("2")
        expect(figure.locator("tr[data-batch-size='5'] .executions")).to_have_text("1")
        expect(figure.locator("figcaption")).to_contain_text("3 run(s), 9 row(s)")
        expect(row(page, static.name, "1").locator(".requests")).to_have_text("0")
        shoot(page, "models")

        twin = httpx.get(f"{url}/api/models", timeout=30).raise_for_status().json()
        assert twin["repository"] == str(tmp_path) and twin["ready"] is True
        version = next(v for v in twin["versions"] if v["name"] == built.name)
        snapshot = served.statistics.snapshot()
        assert (version["requests"], version["failures"]) == (3, 1)
        assert version["inference_count"] == snapshot["inference_count"] == 9
        assert version["execution_count"] == snapshot["execution_count"] == 3
        assert version["mean_compute_s"] == pytest.approx(sum(  # a whole run: Triton's three parts of it
            snapshot["inference_stats"][kind]["ns"] for kind in ("compute_input", "compute_infer", "compute_output"))
            / 3 / 1e9)
        assert version["latency_p50_s"] <= version["latency_p99_s"]
        assert [(b["batch_size"], b["executions"]) for b in version["batch_sizes"]] == [(2, 2), (5, 1)]
        assert "'x'" in version["last_error"]

        server.models.unload(built.name)
        expect(row(page, built.name, "").locator(".state")).to_have_text("UNAVAILABLE")
        expect(page.locator(f"tr.problem[data-model='{built.name}'] .reason")).to_contain_text("unloaded")
        expect(page.locator(f"figure.batch-sizes[data-model='{built.name}']")).to_have_count(0)


def test_a_daemon_without_a_repository_says_how_to_serve_one(http):
    twin = http.get("/api/models").raise_for_status().json()
    assert twin == {"repository": "", "ready": True, "versions": []}
    assert "--model-repository" in http.get("/models").raise_for_status().text
