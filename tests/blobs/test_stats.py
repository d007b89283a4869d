"""What compiles by digest save, as GetStats, /metrics and the dashboard's cache page report it: blob hits per
tier, request bytes per RPC, and the bytes clients did not upload."""
import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.blobs.conftest import two_layers, upload
from xlacs.v1 import xlacs_pb2
from xlacs_server.dashboard import create_app
from xlacs_server.dashboard.http import HttpServer


def test_blob_counters_reach_get_stats_metrics_and_the_dashboard(replica):
    running, stub = replica()
    graph = two_layers(seed=8)
    upload(stub, graph.blobs)
    stub.FindMissingBlobs(xlacs_pb2.FindMissingBlobsRequest(digests=graph.digests()))
    stub.Compile(graph.request(with_manifest=True))
    stats = stub.GetStats(xlacs_pb2.GetStatsRequest())
    total = sum(len(b) for b in graph.blobs.values())
    assert stats.upload_saved_bytes == total
    assert {t.tier: t.hits for t in stats.blob_tiers} == {"l1": len(graph.blobs), "l2": 0}
    http = HttpServer(create_app(running.service, refresh_s=0.5), "127.0.0.1", 0)
    http.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{http.port}", timeout=60) as client:
            samples = {(s.name, frozenset(s.labels.items())): s.value
                       for family in text_string_to_metric_families(client.get("/metrics").text)
                       for s in family.samples}
            cache = client.get("/api/cache").json()
            page = client.get("/cache").text
    finally:
        http.stop()
    assert samples[("xlacs_upload_saved_bytes_total", frozenset())] == total
    assert samples[("xlacs_blob_requests_total", frozenset({"tier": "l1", "result": "hit"}.items()))] == \
        len(graph.blobs)
    # the blobs, the manifest and the binding record
    assert samples[("xlacs_blob_entries", frozenset({"tier": "l2"}.items()))] == len(graph.blobs) + 2
    for rpc in ("UploadBlobs", "FindMissingBlobs", "Compile"):
        assert samples[("xlacs_received_bytes_total", frozenset({"rpc": rpc}.items()))] == \
            stats.received_bytes[rpc] > 0
    assert cache["upload_saved_bytes"] == total and cache["received_bytes"] == dict(stats.received_bytes)
    assert [(t["tier"], t["hits"], t["entries"]) for t in cache["blob_tiers"]] == \
        [(t.tier, t.hits, t.entries) for t in stats.blob_tiers]
    assert 'id="blob-tiers"' in page and 'data-rpc="UploadBlobs"' in page
