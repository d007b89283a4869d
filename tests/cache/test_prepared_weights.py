"""Prepared weights in the shared tiers (cache/prepared.py; docs/cache.md, "Prepared weights"): a fresh replica
sharing Redis binds a cached executable to the prepared weights the first replica kept, instead of running the
prepare program again; a prepared blob or record that does not check is refused, never used: the prepare program
runs again and its results are kept anew. The Compile answers before they are kept: a fresh replica is started once
Redis holds what it reads."""
import threading
import time

import pytest

from tests.cache.conftest import kept, prepared_records, settings
from tests.compile.test_prepare import X, conv_bn, run
from tests.conftest import RunningServer
from tests.oracle import assert_close
from xlacs import Client
from xlacs.v1 import cache_entries_pb2
from xlacs_server.service import CompilationService


@pytest.fixture
def replica(redis_server):
    """Starts daemons sharing `redis_server`, each a fresh replica, and gives a client of each."""
    started = []

    def start() -> Client:
        running = RunningServer(settings(redis_url=redis_server.url))
        started.append((running, Client(running.address, timeout=600)))
        return started[-1][1]
    yield start
    for running, client in started:
        client.close()
        running.stop()


def compile(client: Client, frozen):
    return client.compile(frozen.graph_def, frozen.feeds, frozen.fetches)


def stored(redis_server, key: bytes | str, want: bytes) -> None:
    """Returns once Redis holds `want` under `key`: a replica's store of prepared weights, which runs after its
    Compile answered, put it there (the record is put after its blobs)."""
    while redis_server.client().get(key) != want:
        time.sleep(0.05)


def test_a_fresh_replica_reads_the_prepared_weights_instead_of_running_the_prepare_program(replica, redis_server):
    frozen, fn = conv_bn(21)
    first = compile(replica(), frozen)
    assert "prepare" in first.stage_ms
    kept(redis_server)
    assert len(prepared_records(redis_server)) == 1
    client = replica()
    hit = compile(client, frozen)  # by digest: bound from the binding record
    assert (hit.cache, hit.id, client.stats().compiles) == ("l2", first.id, 0)
    assert "prepared" in hit.stage_ms and "prepare" not in hit.stage_ms, hit.stage_ms
    assert_close(hit(X)[0], fn(X).numpy())


def test_the_compile_answers_before_they_are_kept_and_a_graph_sent_whole_reads_them_too(redis_server):
    options = settings(redis_url=redis_server.url)
    frozen, fn = conv_bn(23)
    service, held, begun = CompilationService(options), threading.Event(), threading.Event()
    begun.set()
    service.tier_up.keep("work queued before", held.wait, begun)  # the worker is busy until `held` is set
    first, _ = run(service, frozen, X)
    assert not prepared_records(redis_server)  # answered, its store still queued
    held.set()
    kept(redis_server)
    hit, (got,) = run(CompilationService(options), frozen, X)
    assert (first.cache, hit.cache) == ("miss", "l2") and "prepare" in first.stage_ms
    assert "prepared" in hit.stage_ms and "prepare" not in hit.stage_ms, hit.stage_ms
    assert_close(got, fn(X).numpy())


@pytest.mark.parametrize("case", ["blob", "record"])
def test_an_altered_prepared_blob_or_record_is_refused_and_the_prepare_program_runs_again(replica, redis_server,
                                                                                          case):
    frozen, fn = conv_bn(22)
    compile(replica(), frozen)
    name = kept(redis_server)
    redis = redis_server.client()
    record = redis.get(name)
    if case == "blob":  # its bytes no longer hash to its digest
        blob = cache_entries_pb2.PreparedRecord.FromString(record[:-32]).weights[0].blob
        key = f"xlacs:blob.{blob.hash}-{blob.size_bytes}:0"
        data = redis.get(key)
        redis.set(key, bytes([data[0] ^ 1]) + data[1:])
    else:  # its HMAC no longer checks
        key, data = name, record
        redis.set(name, record[:-40] + bytes([record[-40] ^ 1]) + record[-39:])
    client = replica()
    hit = compile(client, frozen)
    assert hit.cache == "l2" and "prepare" in hit.stage_ms, hit.stage_ms
    assert_close(hit(X)[0], fn(X).numpy())
    assert {t.tier: t for t in client.stats().blob_tiers}["l2"].rejected == 1
    stored(redis_server, key, data)  # the fresh replica kept them anew, the refused one replaced
    again = compile(replica(), frozen)
    assert "prepared" in again.stage_ms and "prepare" not in again.stage_ms, again.stage_ms
    assert_close(again(X)[0], fn(X).numpy())
