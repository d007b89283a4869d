"""The compile-by-digest section of scripts/bench, on a small MobileNetV2 with its classifier retrained: two
`xlacs serve` processes on a real redis-server, the tiers and bytes it records, its goals and its table."""
from benchmarks import compile_by_digest, goals, report
from benchmarks.processes import RedisServer

CLASSIFIER_BYTES = (1280 * 1000 + 1000) * 4  # MobileNetV2's predictions layer: kernel and bias, both cut


def test_the_section_measures_a_checkpoint_and_a_replica_and_renders(tmp_path):
    redis_server = RedisServer(tmp_path)
    try:
        results = compile_by_digest.measure(tmp_path, redis_server, rounds=1, repeats=2, model="MobileNetV2",
                                            shape=(1, 32, 32, 3), retrained=("predictions",))
    finally:
        redis_server.stop()
    results.update(started="now", finished="then")
    med, (row,) = results["median"], results["rounds"]
    assert [med[label]["cache"] for label in ("cold", "new_client", "same_client", "replica")] == [
        "miss", "l1", "l1", "l2"]
    assert med["cold"]["sent_bytes"] >= results["graph_bytes"]
    assert all(med[label]["sent_bytes"] < 1000 for label in ("new_client", "same_client", "replica"))
    assert results["changed_tensor_bytes"] == CLASSIFIER_BYTES
    checkpoint = row["checkpoint"]
    assert checkpoint["compiles"] == 0 and checkpoint["max_relative_error_vs_tf"] < 1e-4
    assert CLASSIFIER_BYTES <= checkpoint["sent_bytes"] < CLASSIFIER_BYTES + results["skeleton_bytes"] + 100_000
    by_key = {g.key: g for g in goals.evaluate({"compile_by_digest": results})}
    assert by_key["digest_same_client"].value == med["same_client"]["ms"]
    assert by_key["digest_checkpoint"].value == med["checkpoint"]["sent_bytes"] / CLASSIFIER_BYTES
    lines = report._compile_by_digest({"compile_by_digest": results})
    assert any(line.startswith("| second checkpoint |") for line in lines)
