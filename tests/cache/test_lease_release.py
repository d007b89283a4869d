"""At shutdown a replica releases the compile leases it still holds, so the other replicas do not wait for
them to expire before compiling what it abandoned."""
import threading
import time

import tensorflow as tf

from tests.cache.conftest import Graph
from tests.cache.test_tiers import redis_service
from xlacs.freeze import freeze


def slow_graph(n: int = 300) -> Graph:
    """A chain of n Tanh nodes: seconds of passes, lowering and XLA compile on this machine."""
    def fn(x):
        for i in range(n):
            x = tf.tanh(x * 1.01 + float(i % 7))
        return x
    return Graph(freeze(tf.function(fn), tf.TensorSpec([8], tf.float32)), "chain")


def test_close_releases_the_leases_of_compiles_in_flight(redis_server):
    service = redis_service(redis_server)
    r = redis_server.client()
    compiling = threading.Thread(target=lambda: service.compile(slow_graph().spec()), daemon=True)
    compiling.start()
    try:
        deadline = time.monotonic() + 60
        while not r.keys("xlacs:lease:*"):
            assert compiling.is_alive() and time.monotonic() < deadline, "the compile never took its lease"
            time.sleep(0.01)
        service.close()  # what `xlacs serve` does at shutdown, the compile still running
        assert compiling.is_alive() and r.keys("xlacs:lease:*") == []
    finally:
        compiling.join(120)  # a compile left running at the interpreter's exit would abort it
