"""Compile by digest (issue 16) on a frozen Keras ResNet50, client wall time: the cold compile; a repeat by a new
client that reads the graph file (it hashes the file, and the daemon knows the digest); the same client again
(it remembers the digest); a fresh replica sharing the Redis; and a second checkpoint of the model (a few layers
retrained), which should compile nothing and send only the tensors that changed. Bytes sent are the request
bytes the daemon received (GetStats.received_bytes, every RPC), before and after each compile."""
from __future__ import annotations

import pathlib
import statistics
import time

import numpy as np
import tensorflow as tf

from benchmarks.models import Model, tiny_add
from benchmarks.processes import RedisServer, ServeProcess, redis_env
from benchmarks.timing import timed_result
from tests.models.keras_models import frozen_keras
from xlacs import Client, digests, freeze, manifest

MODEL = "ResNet50"
SHAPE = (1, 224, 224, 3)
# Fine-tuning the head: the last bottleneck's 3x3 and 1x1 convolutions and the classifier.
RETRAINED = ("conv5_block3_2_conv", "conv5_block3_3_conv", "predictions")


def checkpoint(model: Model, shape: tuple, retrained: tuple[str, ...]) -> tuple[Model, np.ndarray]:
    """The same Keras model frozen with the layers `retrained` changed (weights scaled by 1 + N(0, 0.1)), and
    TensorFlow's output on the model's input. The Keras model, which tests/models caches, gets its weights back."""
    _, keras_model = frozen_keras(model.name, shape)
    saved = {name: keras_model.get_layer(name).get_weights() for name in retrained}
    rng = np.random.default_rng(16)
    try:
        for name, weights in saved.items():
            keras_model.get_layer(name).set_weights(
                [w * (1 + rng.normal(0, 0.1, w.shape)).astype(w.dtype) for w in weights])
        frozen = freeze(tf.function(lambda x: keras_model(x, training=False)), tf.TensorSpec(shape, tf.float32))
        expected = keras_model(model.inputs[0], training=False).numpy()
    finally:
        for name, weights in saved.items():
            keras_model.get_layer(name).set_weights(weights)
    return Model(f"{model.name} checkpoint 2", frozen, model.inputs), expected


def changed_bytes(old: bytes, new: bytes) -> tuple[int, int]:
    """(bytes of the cut tensors of `new` that `old` does not have, bytes of new's skeleton if it differs)."""
    (before, _), (after, _) = manifest.split(old).manifest(), manifest.split(new).manifest()
    known = {digests.key(c.blob) for c in before.cuts}
    fresh = {digests.key(c.blob): c.blob.size_bytes for c in after.cuts if digests.key(c.blob) not in known}
    return sum(fresh.values()), 0 if after.skeleton == before.skeleton else after.skeleton.size_bytes


def _received(client: Client) -> int:
    return sum(client.stats().received_bytes.values())


def _compile(client: Client, path: pathlib.Path, model: Model, stats: Client, tier: str | None = None):
    """(record, executable) of one Compile of the file at `path`: client wall time, the tier, the bytes the
    daemon received. `tier`: the one that must answer, else the measurement is not what it says."""
    before = _received(stats)
    # With the optimized program: the cold compile does all the work a replica's L2 hit then saves.
    ms, executable = timed_result(lambda: client.compile(path, model.frozen.feeds, model.frozen.fetches,
                                                          name=model.name, wait_optimized=True))
    if tier is not None and executable.cache != tier:
        raise RuntimeError(f"{model.name}: expected a {tier!r} compile, the daemon answered {executable.cache!r}")
    return {"ms": ms, "cache": executable.cache, "sent_bytes": _received(stats) - before,
            "uploaded_bytes": executable.upload.uploaded_bytes, "stage_ms": executable.stage_ms}, executable


def _hash_ms(path: pathlib.Path) -> float:
    """What a new client spends on the file's digest: map it and hash it, with nothing remembered."""
    def digest():
        with digests.FileDigests().open(path) as (d, _):
            return d
    return timed_result(digest)[0]


def _round(directory: pathlib.Path, redis_server: RedisServer, paths: dict, models: dict, expected: np.ndarray,
           repeats: int) -> dict:
    redis_server.flush()
    first, graph, second = models["first"], paths["first"], paths["second"]
    row = {"new_client": [], "same_client": [], "hash_ms": []}
    daemon = ServeProcess(directory, redis_env(redis_server))
    try:
        daemon.warm_up(tiny_add())
        with daemon.client() as stats:
            with daemon.client() as client:
                row["cold"], _ = _compile(client, graph, first, stats, "miss")
            for _ in range(repeats):
                row["hash_ms"].append(_hash_ms(graph))
                with daemon.client() as client:
                    row["new_client"].append(_compile(client, graph, first, stats, "l1")[0])
                    row["same_client"].append(_compile(client, graph, first, stats, "l1")[0])
            compiles = stats.stats().compiles
            with daemon.client() as client:
                row["checkpoint"], executable = _compile(client, second, models["second"], stats)
                got = executable(*first.inputs)[0]
            row["checkpoint"]["compiles"] = stats.stats().compiles - compiles
            row["checkpoint"]["max_relative_error_vs_tf"] = float(
                np.max(np.abs(got - expected)) / max(1.0, float(np.max(np.abs(expected)))))
        stored = _prepared_stored(redis_server, 2)  # the two checkpoints' prepared weights
        replica = ServeProcess(directory, redis_env(redis_server))
        try:
            replica.warm_up(tiny_add())
            with replica.client() as stats, replica.client() as client:
                row["replica"], _ = _compile(client, graph, first, stats, "l2")
            row["replica"]["prepared_stored"] = stored
        finally:
            replica.stop()
    finally:
        daemon.stop()
    return row


def _prepared_stored(redis_server: RedisServer, count: int, timeout_s: float = 120.0) -> bool:
    """Whether Redis holds `count` records of prepared weights within the timeout: the daemon stores them after it
    answers (docs/cache.md, Prepared weights), and a replica started before that runs the prepare program itself."""
    deadline = time.monotonic() + timeout_s
    while len(redis_server.client().keys("xlacs:prepared.*")) < count:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def measure(directory: pathlib.Path, redis_server: RedisServer, rounds: int, repeats: int, model: str = MODEL,
            shape: tuple = SHAPE, retrained: tuple[str, ...] = RETRAINED) -> dict:
    """`model`, a Keras application at input `shape`, and its checkpoint with the layers `retrained` changed."""
    frozen, _ = frozen_keras(model, shape)
    first = Model(model, frozen, [np.random.default_rng(1).uniform(-1, 1, shape).astype(np.float32)])
    second, expected = checkpoint(first, shape, retrained)
    paths = {"first": directory / f"{model}.pb", "second": directory / f"{model}-checkpoint-2.pb"}
    paths["first"].write_bytes(first.frozen.graph_def)
    paths["second"].write_bytes(second.frozen.graph_def)
    tensors, skeleton = changed_bytes(first.frozen.graph_def, second.frozen.graph_def)
    split = manifest.split(first.frozen.graph_def)
    results = {"model": model, "graph_bytes": len(first.frozen.graph_def), "skeleton_bytes": len(split.skeleton),
               "cuts": len(split.cuts), "retrained": list(retrained), "changed_tensor_bytes": tensors,
               "changed_skeleton_bytes": skeleton, "repeats": repeats,
               "rounds": [_round(directory, redis_server, paths, {"first": first, "second": second}, expected,
                                 repeats) for _ in range(rounds)]}
    flat = {label: [r for row in results["rounds"] for r in (row[label] if isinstance(row[label], list)
                                                                  else [row[label]])]
            for label in ("cold", "new_client", "same_client", "replica", "checkpoint")}
    results["median"] = {label: {"ms": statistics.median(r["ms"] for r in records),
                                 "sent_bytes": statistics.median(r["sent_bytes"] for r in records),
                                 "cache": records[-1]["cache"]} for label, records in flat.items()}
    results["median"]["hash_ms"] = statistics.median(ms for row in results["rounds"] for ms in row["hash_ms"])
    return results
