"""Cache integrity under attack: someone who can write to the shared Redis but lacks the HMAC secret plants
another program's executable at a real key. The daemon never loads it: it recompiles and computes what
TensorFlow computes."""
import numpy as np
import pytest
import tensorflow as tf

from tests.cache.conftest import SECRET, settings
from xlacs import freeze
from xlacs_server.cache.entry import decode, encode
from xlacs_server.cache.secret import secret_id
from xlacs_server.pipeline.request import CompileSpec
from xlacs_server.service import CompilationService

KEY_PREFIX = f"xlacs:entry:{secret_id(SECRET.encode())}."  # entries live under their secret's id


def frozen(fn):
    graph = freeze(tf.function(fn), tf.TensorSpec([4], tf.float32))
    name, (_, shape) = next(iter(graph.feeds.items()))
    return graph, CompileSpec(graph.graph_def, [(name, 1, shape)], graph.fetches, graph_name="target")


def key_of(spec: CompileSpec) -> str:
    return KEY_PREFIX + CompilationService(settings()).compile(spec).loaded.executable.key


@pytest.mark.parametrize("planted", ["another key's signed entry", "an entry signed with another secret"])
def test_a_planted_executable_is_never_loaded(redis_server, planted):
    _, target_spec = frozen(lambda x: x + 1.0)
    _, other_spec = frozen(lambda x: x * 100.0)  # same signature, another program
    victim = CompilationService(settings(redis_url=redis_server.url))
    victim.compile(other_spec)  # a genuine entry, written by a replica with the secret
    r = redis_server.client()
    other_key, target_key = key_of(other_spec), key_of(target_spec)
    blob = r.get(other_key)
    if planted == "an entry signed with another secret":
        blob = encode(decode(blob, other_key.removeprefix(KEY_PREFIX), SECRET.encode()), b"the attacker's own key")
    r.set(target_key, blob)

    replica = CompilationService(settings(redis_url=redis_server.url))
    result = replica.compile(target_spec)
    x = np.arange(4, dtype=np.float32)
    _, (got,) = replica.execute(result.loaded.id, {target_spec.feeds[0][0]: x})
    assert result.cache == "miss" and replica.counters.compiles == 1
    np.testing.assert_array_equal(got, tf.function(lambda x: x + 1.0)(x).numpy())
    assert {t.tier: t.stats for t in replica.tiers}["l2"].rejected == 1
