"""Feeds with unknown dims over real gRPC, TensorFlow as the oracle: each request is padded to its shape bucket,
each bucket compiles once (when a request first needs it), outputs come back at the request's size, and a replica
sharing the Redis reuses the bucket executables another one compiled."""
import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests.cache.conftest import SECRET
from tests.conftest import RunningServer
from tests.models.keras_models import rescale_weights
from tests.oracle import assert_close
from xlacs import Client, tensors
from xlacs.cli import main, parse_feed
from xlacs.freeze import freeze
from xlacs.v1 import xlacs_pb2
from xlacs_server.config import Settings
from xlacs_server.metrics import registry_for

MAX_BUCKET = Settings().max_bucket_size  # the session server's: buckets 1, 2, 4, ..., 64


def small_cnn(seed: int) -> tf.keras.Model:
    """MobileNetV2's blocks in small: strided conv, BatchNorm, ReLU6, depthwise conv, pointwise conv, global
    average pooling and a dense classifier, with weights re-scaled so that activations stay of order 1."""
    tf.keras.utils.set_random_seed(seed)
    x = inputs = tf.keras.Input((16, 16, 3))
    x = tf.keras.layers.Conv2D(8, 3, strides=2, padding="same", use_bias=False)(x)
    x = tf.keras.layers.ReLU(6.0)(tf.keras.layers.BatchNormalization()(x))
    x = tf.keras.layers.DepthwiseConv2D(3, padding="same", use_bias=False)(x)
    x = tf.keras.layers.ReLU(6.0)(tf.keras.layers.BatchNormalization()(x))
    x = tf.keras.layers.BatchNormalization()(tf.keras.layers.Conv2D(16, 1, use_bias=False)(x))
    x = tf.keras.layers.Dense(10)(tf.keras.layers.GlobalAveragePooling2D()(x))
    model = tf.keras.Model(inputs, x)
    rescale_weights(model, seed)
    return model


def two_input_model(seed: int) -> tf.keras.Model:
    """Two named inputs of one batch, two outputs: a [batch, 3] head and a [batch] sum."""
    tf.keras.utils.set_random_seed(seed)
    a, b = tf.keras.Input((6,), name="a"), tf.keras.Input((4,), name="b")
    hidden = tf.keras.layers.Dense(8, activation="relu")(tf.keras.layers.Concatenate()([a, b]))
    return tf.keras.Model([a, b], [tf.keras.layers.Dense(3)(hidden), tf.keras.ops.sum(hidden, axis=1)])


def batch(n: int, *dims: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + n).uniform(-1, 1, (n, *dims)).astype(np.float32)


@pytest.fixture(scope="module")
def cnn():
    model = small_cnn(seed=1)
    return model, tf.function(lambda x: model(x, training=False))


def test_a_cnn_with_unknown_batch_matches_tensorflow_with_one_compile_per_bucket(server, client, cnn):
    model, fn = cnn
    before = client.stats()
    executable = client.compile_function(fn, tf.TensorSpec([None, 16, 16, 3], tf.float32))
    assert [list(s.shape) for s in executable.signature.inputs] == [[-1, 16, 16, 3]]
    assert [list(s.shape) for s in executable.signature.outputs] == [[-1, 10]]
    assert client.stats().compiles == before.compiles  # nothing compiles before an Execute needs a bucket
    for n in (1, 3, 8):
        x = batch(n, 16, 16, 3)
        want = model(x, training=False).numpy()
        assert want.std() > 0.1
        got, = executable(x)
        assert_close(got, want)
    after = client.stats()
    assert after.bucket_compiles - before.bucket_compiles == 3  # buckets 1, 4 and 8
    assert after.compiles - before.compiles == 3
    l1 = {t.tier: t for t in after.tiers}["l1"].misses - {t.tier: t for t in before.tiers}["l1"].misses
    assert l1 == 3
    # batch 3 is padded to 4: one image of zeros; the inputs as padded hold 1 + 4 + 8 images
    assert after.padding_elements - before.padding_elements == 16 * 16 * 3
    assert after.padded_elements - before.padded_elements == 13 * 16 * 16 * 3
    for n in (4, 3):  # buckets compiled already
        assert_close(executable(batch(n, 16, 16, 3, seed=7))[0], model(batch(n, 16, 16, 3, seed=7)).numpy())
    again = client.stats()
    assert (again.bucket_compiles, again.compiles) == (after.bucket_compiles, after.compiles)
    scraped = registry_for(server.service)
    assert scraped.get_sample_value("xlacs_bucket_compiles_total") == again.bucket_compiles
    assert scraped.get_sample_value("xlacs_padding_elements_total") == again.padding_elements
    assert scraped.get_sample_value("xlacs_padded_elements_total") == again.padded_elements


def test_a_batch_beyond_the_largest_bucket_is_invalid_naming_the_input_and_the_limit(client, cnn):
    executable = client.compile_function(cnn[1], tf.TensorSpec([None, 16, 16, 3], tf.float32))
    with pytest.raises(grpc.RpcError) as raised:
        executable(batch(MAX_BUCKET + 1, 16, 16, 3))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "'x:0'" in raised.value.details() and f"largest bucket {MAX_BUCKET}" in raised.value.details()
    with pytest.raises(grpc.RpcError) as raised:
        executable(batch(2, 16, 16, 4))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "expected float32[-1, 16, 16, 3], got float32[2, 16, 16, 4]" in raised.value.details()


def test_two_inputs_with_explicit_buckets(client):
    model = two_input_model(seed=2)
    fn = tf.function(lambda a, b: model([a, b], training=False))
    before = client.stats()
    executable = client.compile_function(fn, tf.TensorSpec([None, 6], tf.float32), tf.TensorSpec([None, 4], tf.float32),
                                         bucket_sizes=[4, 16])
    assert [list(s.shape) for s in executable.signature.outputs] == [[-1, 3], [-1]]
    for n in (1, 3, 8):
        a, b = batch(n, 6), batch(n, 4, seed=50)
        got = executable(a, b)
        want = model([a, b], training=False)
        assert [g.shape for g in got] == [(n, 3), (n,)]
        for g, w in zip(got, want):
            assert_close(g, w.numpy())
    assert client.stats().bucket_compiles - before.bucket_compiles == 2  # buckets 4 and 16
    with pytest.raises(grpc.RpcError) as raised:
        executable(batch(3, 6), batch(2, 4))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "sizes 3 and 2 at axis 0" in raised.value.details()
    with pytest.raises(grpc.RpcError) as raised:
        executable(batch(17, 6), batch(17, 4))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "size 17" in raised.value.details() and "largest bucket 16" in raised.value.details()


@pytest.mark.parametrize("sizes, code, words", [
    ([4, 2], grpc.StatusCode.INVALID_ARGUMENT, "strictly ascending"),
    ([0, 2], grpc.StatusCode.INVALID_ARGUMENT, "positive"),
    ([1, 2 * MAX_BUCKET], grpc.StatusCode.RESOURCE_EXHAUSTED, f"max_bucket_size={MAX_BUCKET}"),
])
def test_bad_bucket_sizes_are_refused(client, cnn, sizes, code, words):
    with pytest.raises(grpc.RpcError) as raised:
        client.compile_function(cnn[1], tf.TensorSpec([None, 16, 16, 3], tf.float32), bucket_sizes=sizes)
    assert raised.value.code() == code and words in raised.value.details()


def test_an_output_dim_that_does_not_equal_the_unknown_dim_is_refused_at_compile(client):
    with pytest.raises(grpc.RpcError) as raised:  # [n, 4] -> [4n]: padding would land between the items
        client.compile_function(lambda x: tf.reshape(x, [-1]) * 2.0, tf.TensorSpec([None, 4], tf.float32))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "dim 0 is 128 when the unknown dims at axis 0 are 32 and 256 when they are 64" in raised.value.details()


def test_a_first_execute_of_a_bucket_past_the_clients_deadline_stops_and_the_next_one_runs(client, cnn):
    model, fn = cnn
    executable = client.compile_function(fn, tf.TensorSpec([None, 16, 16, 3], tf.float32), bucket_sizes=[5])
    x = batch(5, 16, 16, 3)
    request = xlacs_pb2.ExecuteRequest(executable_id=executable.id, inputs=[tensors.to_proto("x:0", x)])
    with pytest.raises(grpc.RpcError) as raised:  # the bucket's compile takes seconds
        client.stub.Execute(request, timeout=0.05)
    assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert_close(executable(x)[0], model(x).numpy())


def test_a_request_big_enough_to_stream_runs_through_execute_stream(client):
    executable = client.compile_function(lambda x: tf.nn.relu(x) * 2.0 - 1.0,
                                         tf.TensorSpec([None, 512, 512, 3], tf.float32), bucket_sizes=[2, 4])
    x = batch(3, 512, 512, 3)  # 9.4 MB in: the client streams the call (ExecuteStream)
    streamed = client.stats().received_bytes["ExecuteStream"]
    got, = executable(x)
    assert client.stats().received_bytes["ExecuteStream"] - streamed >= x.nbytes
    assert_close(got, (tf.nn.relu(x) * 2.0 - 1.0).numpy())


def test_a_replica_sharing_redis_reuses_the_bucket_executables(redis_server):
    model = two_input_model(seed=3)
    frozen = freeze(tf.function(lambda a, b: model([a, b], training=False)), tf.TensorSpec([None, 6], tf.float32),
                    tf.TensorSpec([None, 4], tf.float32))
    settings = Settings(cache_dir="", redis_url=redis_server.url, cache_secret=SECRET)
    first, second = RunningServer(settings), RunningServer(settings)
    try:
        with Client(first.address, timeout=600) as a, Client(second.address, timeout=600) as b:
            compiled = a.compile(frozen.graph_def, frozen.feeds, frozen.fetches)
            for n in (3, 8):
                compiled(batch(n, 6), batch(n, 4))
            assert a.stats().bucket_compiles == 2
            loaded = b.compile(frozen.graph_def, frozen.feeds, frozen.fetches)
            assert loaded.id == compiled.id and list(loaded.signature.inputs[0].shape) == [-1, 6]
            for n in (3, 8):
                got = loaded(batch(n, 6), batch(n, 4))
                for g, w in zip(got, model([batch(n, 6), batch(n, 4)], training=False)):
                    assert_close(g, w.numpy())
            stats = b.stats()
            assert (stats.bucket_compiles, stats.compiles) == (0, 0)
            assert {t.tier: t for t in stats.tiers}["l2"].hits == 2
    finally:
        first.stop()
        second.stop()


def test_the_cli_runs_a_graph_with_an_unknown_batch(server, tmp_path, capsys):
    model = two_input_model(seed=4)
    frozen = freeze(tf.function(lambda a, b: model([a, b], training=False)), tf.TensorSpec([None, 6], tf.float32),
                    tf.TensorSpec([None, 4], tf.float32))
    assert parse_feed("a:0=float32[-1,6]") == ("a:0", (np.dtype(np.float32), (-1, 6)))
    graph = tmp_path / "two_inputs.pb"
    graph.write_bytes(frozen.graph_def)
    a, b = batch(3, 6), batch(3, 4)
    (feed_a, _), (feed_b, _) = frozen.feeds.items()
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    argv = ["run", str(graph), "--server", server.address, "--json", "--out", str(tmp_path / "out"),
            "--input", f"{feed_a}={tmp_path / 'a.npy'}", "--input", f"{feed_b}={tmp_path / 'b.npy'}",
            "--feed", f"{feed_a}=float32[-1,6]", "--feed", f"{feed_b}=float32[-1,4]", "--bucket-sizes", "2,4",
            *[arg for fetch in frozen.fetches for arg in ("--fetch", fetch)]]
    assert main(argv) == 0, capsys.readouterr()
    want = model([a, b], training=False)
    for fetch, w in zip(frozen.fetches, want):
        assert_close(np.load(tmp_path / "out" / (fetch.replace(":", "_") + ".npy")), w.numpy())
