"""The JSON twins, /metrics and the health checks, over HTTP against the live daemon that `client` compiles on."""
import html.parser
import pathlib
import re
import time

import grpc
import jax
import numpy as np
import pytest
import tensorflow as tf
from prometheus_client.parser import text_string_to_metric_families

from tests.cache.conftest import deep_graph
from tests.dashboard.conftest import REFRESH_S, dense_graph
from xlacs.freeze import freeze
from xlacs.v1 import tf_graph_pb2
from xlacs_server.dashboard import app as dashboard_app
from xlacs_server.lower import coverage as coverage_module, registry

SEED_COPY = pathlib.Path(coverage_module.__file__).parent / "data" / "seed_xla_ops.txt"
# The table of the article xlacs comes from (228 ops with XLA kernels in TF 1.14), as the project's reference
# holds it, shipped with the tests so that the check runs in every checkout.
SEED_REFERENCE = pathlib.Path(__file__).parent / "seed_xla_ops.txt"


def executable_row(http, graph_name: str) -> dict:
    rows = [e for e in http.get("/api/executables").json()["executables"] if e["graph_name"] == graph_name]
    assert len(rows) == 1, f"expected one executable of graph {graph_name!r}, got {rows}"
    return rows[0]


def ops_by_name(http, **params) -> dict[tuple[str, str | None], dict]:
    response = http.get("/api/ops", params=params)
    assert response.status_code == 200, response.text
    return {(o["op"], o["platform"]): o for o in response.json()["ops"]}


def metric_samples(http) -> dict[tuple[str, frozenset], float]:
    text = http.get("/metrics").text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_overview_shows_devices_versions_and_request_totals(http, server, client):
    before = http.get("/api/overview").json()
    client.ops()
    after = http.get("/api/overview").json()
    assert [d["name"] for d in after["devices"]] == [d.name for d in server.service.devices.all]
    for shown, device in zip(after["devices"], server.service.devices.all):
        assert (shown["platform"], shown["kind"]) == (device.platform, device.kind)
        assert shown["memory_used_bytes"] > 0 and shown["busy"] is False
    assert after["versions"]["jax"] == jax.__version__
    assert after["uptime_s"] > before["uptime_s"] > 0
    assert after["totals"]["requests"] >= before["totals"]["requests"] + 1


def test_ops_lists_every_registration_as_list_ops_does(http, client):
    ops = ops_by_name(http)
    assert set(ops) == {(l.op, l.platform) for l in registry.registrations()}
    for listed in client.ops():  # the gRPC ListOps view of the same registry
        shown = ops[(listed.op, None)]
        assert shown["dtypes"] == list(listed.dtypes)
        assert shown["devices"] == list(listed.devices)
        assert shown["constant_inputs"] == list(listed.constant_inputs)
        assert shown["attrs"] == list(listed.attrs)


def test_ops_search_and_device_filter(http):
    found = ops_by_name(http, q="mAtMuL")  # case-insensitive, on op and module names
    assert ("MatMul", None) in found and ("Relu", None) not in found
    assert set(found) == {(l.op, l.platform) for l in registry.registrations()
                          if "matmul" in l.op.lower() or "matmul" in l.module.lower()}
    for platform in registry.PLATFORMS:
        on_platform = ops_by_name(http, device=platform)
        assert set(on_platform) == {(l.op, l.platform) for l in registry.registrations()
                                    if registry.lookup(l.op, platform) is l}
    assert http.get("/api/ops", params={"device": "tpu"}).status_code == 422


def test_coverage_against_the_seed_op_list(http):
    seed = SEED_COPY.read_text().split()
    assert seed == SEED_REFERENCE.read_text().split(), "the packaged copy of the seed op list is stale"
    coverage = http.get("/api/ops").json()["coverage"]
    assert coverage["total"] == len(seed) == 228
    assert coverage["covered"] == [op for op in seed if any(registry.lookup(op, p) for p in registry.PLATFORMS)]
    assert sorted(coverage["covered"] + coverage["missing"]) == sorted(seed)
    assert "MatMul" in coverage["covered"]
    on_cpu = http.get("/api/ops", params={"device": "cpu"}).json()["coverage"]
    assert on_cpu["covered"] == [op for op in seed if registry.lookup(op, "cpu")]


def test_ops_count_the_compiled_graphs_that_use_them(http, client, server):
    graph = dense_graph(rows=3)
    graph.compile(client)
    histogram = http.get(f"/api/executables/{executable_row(http, graph.name)['key']}").json()["op_histogram"]
    assert {"MatMul", "BiasAdd", "Relu", "Softmax"} <= set(histogram)
    assert set(histogram) <= {n.op for n in tf_graph_pb2.GraphDef.FromString(graph.frozen.graph_def).node}
    ops = ops_by_name(http)
    cached = server.service.tiers.l1.values()
    for op in ("MatMul", "Softmax", "Add"):
        assert ops[(op, None)]["graphs"] == sum(op in e.op_histogram for e in cached)
    assert ops[("MatMul", None)]["graphs"] >= 1


def test_cache_counts_the_hits_a_client_causes(http, client):
    graph = dense_graph(rows=5)
    graph.compile(client)
    before = {t["tier"]: t for t in http.get("/api/cache").json()["tiers"]}["l1"]
    assert graph.compile(client).cache == "l1"
    assert graph.compile(client).cache == "l1"
    hit_at = time.time()
    deadline = time.monotonic() + 10 * REFRESH_S
    while True:  # until the sampler has taken a sample after the hits
        cache = http.get("/api/cache").json()
        l1 = {t["tier"]: t for t in cache["tiers"]}["l1"]
        points = {h["tier"]: h["points"] for h in cache["history"]}["l1"]
        if points and points[-1]["time_unix"] > hit_at:
            break
        assert time.monotonic() < deadline, f"no sample with the hits: {cache}"
        time.sleep(REFRESH_S / 4)
    assert (l1["hits"], l1["misses"]) == (before["hits"] + 2, before["misses"])
    assert l1["hit_rate"] == pytest.approx(l1["hits"] / (l1["hits"] + l1["misses"]))
    assert any(p["hit_rate"] is not None and p["hit_rate"] > 0 for p in points)
    assert l1["entries"] >= 1 and l1["bytes"] > 0 and l1["compile_s_saved"] > before["compile_s_saved"]


def test_an_executable_shows_the_program_it_runs_once_the_optimized_one_replaced_the_quick_one(http, client):
    graph = deep_graph(11)  # over the default tiered_min_ops: its cold compile is tiered
    executable = graph.compile(client)
    assert (executable.cache, executable.tier) == ("miss", "quick")
    executable.wait_optimized()
    row = executable_row(http, graph.name)
    assert row["tier"] == "optimized" and row["stage_ms"]["optimize"] > 0


def test_executables_list_detail_and_downloads(http, client):
    graph = dense_graph(rows=2)
    executable = graph.compile(client)
    executable.execute(graph.inputs())
    row = executable_row(http, graph.name)
    assert row["device"] == "cpu:0" and row["size_bytes"] > 0 and row["hits"] == 1
    assert row["last_used_unix"] is not None and executable.id.startswith(row["key"])
    assert [(s["name"], s["shape"]) for s in row["inputs"]] == [(s.name, list(s.shape))
                                                              for s in executable.signature.inputs]
    assert [s["name"] for s in row["outputs"]] == executable.output_names
    assert {"parse", "key", "passes", "lower", "compile"} <= set(row["stage_ms"])
    detail = http.get(f"/api/executables/{row['key']}").json()
    assert [p["name"] for p in detail["passes"]] == [p.name for p in executable.passes]
    stablehlo = http.get(detail["stablehlo_url"])
    assert stablehlo.status_code == 200 and "attachment" in stablehlo.headers["content-disposition"]
    assert "func.func public @main" in stablehlo.text and "stablehlo.dot_general" in stablehlo.text
    hlo = http.get(detail["hlo_url"])
    assert hlo.status_code == 200 and hlo.text.startswith("HloModule") and "ENTRY" in hlo.text
    page = http.get(f"/executables/{row['key']}")
    assert page.status_code == 200 and detail["stablehlo_url"] in page.text


@pytest.mark.parametrize("path", ["/api/executables/nope-0", "/executables/nope-0", "/api/executables/nope-0/hlo",
                                  "/api/executables/nope-0/stablehlo"])
def test_an_unknown_executable_is_not_found(http, path):
    response = http.get(path)
    assert response.status_code == 404
    if path.startswith("/api/"):
        assert "nope-0" in response.json()["detail"]
    else:  # a person gets a page
        assert response.headers["content-type"].startswith("text/html") and "nope-0" in response.text


def test_errors_show_the_failed_rpc_escaped(http, client):
    graph = dense_graph(rows=1)
    total = http.get("/api/errors").json()["total"]
    with pytest.raises(grpc.RpcError) as failed:
        client.compile(graph.frozen.graph_def, graph.frozen.feeds, ["<b>no_such_node</b>:0"])
    errors = http.get("/api/errors").json()
    assert errors["total"] == total + 1
    latest = errors["errors"][0]
    assert (latest["method"], latest["code"]) == ("Compile", failed.value.code().name) == ("Compile", "INVALID_ARGUMENT")
    assert latest["message"] == failed.value.details()
    assert re.fullmatch(r"[0-9a-f]{16}", latest["request_id"])
    page = http.get("/errors").text
    assert "&lt;b&gt;no_such_node&lt;/b&gt;" in page and "<b>no_such_node" not in page


def test_metrics_follow_compiles_executes_and_errors(http, client, server):
    before = metric_samples(http)
    graph = dense_graph(rows=7)
    graph.compile(client).execute(graph.inputs())
    graph.compile(client)
    with pytest.raises(grpc.RpcError):
        client.executable_info("nope-0")
    after = metric_samples(http)

    def delta(name, **labels):
        key = (name, frozenset(labels.items()))
        return after.get(key, 0) - before.get(key, 0)
    for stage in ("parse", "key", "passes", "lower", "compile"):
        assert delta("xlacs_compile_seconds_count", stage=stage) == 1
    assert delta("xlacs_execute_seconds_count", device="cpu:0") == 1
    assert delta("xlacs_rpc_errors_total", method="GetExecutable", code="NOT_FOUND") == 1
    l1 = server.service.tiers.l1.stats
    assert after[("xlacs_cache_requests_total", frozenset({"tier": "l1", "result": "hit"}.items()))] == l1.hits
    assert after[("xlacs_cache_requests_total", frozenset({"tier": "l1", "result": "miss"}.items()))] == l1.misses
    assert after[("xlacs_device_memory_used_bytes", frozenset({"device": "cpu:0"}.items()))] > 0
    assert after[("xlacs_device_memory_limit_bytes", frozenset({"device": "cpu:0"}.items()))] > 0


def test_health_and_readiness(http, dashboard):
    assert http.get("/healthz").json() == {"status": "ok"}
    assert http.get("/readyz").json() == {"status": "ready"}
    assert [(r.status_code, r.content) for r in (http.head("/healthz"), http.head("/readyz"))] == [(200, b"")] * 2
    service = dashboard.app.state.dashboard.service
    service.draining = True
    try:
        response = http.get("/readyz")
        assert (response.status_code, response.json()) == (503, {"status": "draining"})
        assert (http.head("/readyz").status_code, http.head("/readyz").content) == (503, b"")
    finally:
        service.draining = False


class _Assets(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("script", "img") and attrs.get("src"):
            self.urls.append(attrs["src"])
        if tag == "link" and attrs.get("href"):
            self.urls.append(attrs["href"])


@pytest.mark.parametrize("page", [p for p, _, _ in dashboard_app.PAGES if "{" not in p])
def test_pages_render_with_local_assets_only(http, page):
    response = http.get(page)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assets = _Assets()
    assets.feed(response.text)
    assert assets.urls, "a page without its stylesheet and script"
    for url in assets.urls:
        assert url.startswith("/static/"), f"{page} loads {url} from outside the daemon"
        assert http.get(url).status_code == 200


def test_an_executable_with_a_prepare_program_shows_it_and_its_stablehlo(http, client):
    """The weight-only part (here w * 2) is a program of its own: its size, its last run and its StableHLO."""
    w = tf.constant(np.random.default_rng(0).normal(size=(3, 29)), tf.float32)
    frozen = freeze(lambda x: tf.matmul(x, w * 2.0), tf.TensorSpec((2, 3), tf.float32))
    name = f"prepared_{time.time_ns()}"
    client.compile(frozen.graph_def, frozen.feeds, frozen.fetches, name=name)
    row = executable_row(http, name)
    assert 0 < row["prepare_size_bytes"] < row["size_bytes"] and row["prepare_ms"] > 0
    detail = http.get(f"/api/executables/{row['key']}").json()
    prepared = http.get(detail["prepare_stablehlo_url"])
    assert prepared.status_code == 200 and "stablehlo.multiply" in prepared.text
    assert "stablehlo.dot_general" not in prepared.text
    assert "prepare-stablehlo" in http.get(f"/executables/{row['key']}").text


def test_resident_tensors_are_listed_with_their_gauges_and_go_when_freed(http, client):
    graph = dense_graph(rows=3, prefix="resident")
    executable = graph.compile(client)
    (kept,) = executable.execute(graph.inputs(), keep=True, ttl_s=300)
    try:
        rows = [t for t in http.get("/api/executables").json()["resident"]
                if t["handle_prefix"] == kept.handle[:len(t["handle_prefix"])]]
        assert len(rows) == 1, rows
        row = rows[0]
        assert kept.handle not in http.get("/api/executables").text  # a handle lets anyone read it: never shown
        assert (row["executable_id"], row["output"], row["device"]) == (executable.id, kept.name, "cpu:0")
        assert (row["dtype"], row["shape"], row["bytes"]) == ("float32", [3, 4], kept.nbytes)
        assert 290 < row["expires_in_s"] <= 300
        assert f'data-handle-prefix="{row["handle_prefix"]}"' in http.get("/executables").text
        samples = metric_samples(http)
        stats = client.stats()
        assert samples[("xlacs_resident_tensors", frozenset())] == stats.resident_tensors >= 1
        assert samples[("xlacs_resident_bytes", frozenset())] == stats.resident_bytes >= kept.nbytes
    finally:
        freed = metric_samples(http)[("xlacs_resident_released_total", frozenset({"how": "freed"}.items()))]
        assert kept.free()
    assert row["handle_prefix"] not in [t["handle_prefix"] for t in http.get("/api/executables").json()["resident"]]
    assert metric_samples(http)[("xlacs_resident_released_total", frozenset({"how": "freed"}.items()))] == freed + 1
