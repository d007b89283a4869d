"""Compile remote, run local (docs/data_plane.md) over real gRPC: an executable downloaded with
Executable.local() runs in this process and gives TensorFlow's results and the daemon's own; a second download
sends only the program; blobs that do not match their digests are refused before anything runs; a runtime that
differs falls back to the daemon, saying which versions differ."""
from __future__ import annotations

import subprocess
import sys

import grpc
import numpy as np
import pytest
import tensorflow as tf

from tests.oracle import assert_close
from xlacs import Client, freeze, local
from xlacs.v1 import xlacs_pb2
from xlacs_server.config import Settings
from xlacs_server.errors import NotFound
from xlacs_server.rpc.server import create_server
from xlacs_server.daemon import Daemon

X = np.random.default_rng(5).uniform(-1, 1, (2, 8, 8, 3)).astype(np.float32)


def cnn() -> tf.keras.Model:
    """conv -> BatchNorm (folded into a prepare program: prepared weights in the package) -> dense."""
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([
        tf.keras.Input((8, 8, 3)), tf.keras.layers.Conv2D(8, 3, padding="same"),
        tf.keras.layers.BatchNormalization(), tf.keras.layers.ReLU(), tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(10)])
    bn = model.layers[1]
    rng = np.random.default_rng(0)
    bn.set_weights([rng.uniform(0.8, 1.2, 8), rng.normal(0, 0.1, 8), rng.normal(0, 0.1, 8), rng.uniform(0.5, 1.5, 8)])
    return model


@pytest.fixture(scope="module")
def frozen_cnn():
    model = cnn()
    frozen = freeze(tf.function(lambda x: model(x, training=False)), tf.TensorSpec(X.shape, tf.float32))
    return frozen, model(X, training=False).numpy()


def compile_cnn(client, frozen):
    return client.compile(frozen.graph_def, frozen.feeds, frozen.fetches, name="local_cnn")


@pytest.fixture(scope="module")
def compiled(client, frozen_cnn):
    frozen, want = frozen_cnn
    return compile_cnn(client, frozen), want


def test_local_run_matches_tf_and_the_daemon(server, compiled):
    executable, want = compiled
    assert float(np.std(want)) > 0.1  # activations of order 1: the comparison means something
    assert server.service.loaded(executable.id).executable.prepare is not None  # prepared weights travel too
    run = executable.local()
    assert run.runs == "local" and run.reason == ""
    assert run.id == executable.id and run.input_names == executable.input_names
    assert len(run.package.weights) == len(run.package.weight_blobs) > 0
    got, = run(X)
    assert_close(got, want)
    remote, = executable(X)
    np.testing.assert_allclose(got, remote, rtol=1e-6, atol=1e-6)
    by_name, = run.execute({executable.input_names[0]: X})
    np.testing.assert_array_equal(by_name, got)


def test_a_second_download_sends_only_the_program(server, frozen_cnn):
    frozen, want = frozen_cnn
    with Client(server.address, timeout=600) as fresh:  # an empty memo
        executable = compile_cnn(fresh, frozen)
        first = executable.local()
        second = executable.local()
    program = (first.package.program.hash, first.package.program.size_bytes)
    weights = {(d.hash, d.size_bytes) for d in first.package.weight_blobs}
    assert {(d.hash, d.size_bytes) for d in first.download.received_blobs} == {program, *weights}
    assert [(d.hash, d.size_bytes) for d in second.download.received_blobs] == [program]
    assert second.download.received_bytes == program[1]
    assert second.download.remembered_blobs == len(weights)
    assert_close(second(X)[0], want)


def test_a_tampered_blob_is_refused(server, frozen_cnn):
    frozen, _ = frozen_cnn
    with Client(server.address, timeout=600) as fresh:
        executable = compile_cnn(fresh, frozen)
        first = executable.local()
        digest = first.package.weight_blobs[0]
        good = fresh.blob_memo.get(digest)
        fresh.blob_memo.put(digest, bytes([good[0] ^ 1]) + bytes(good[1:]))  # one bit flipped in the memo
        with pytest.raises(local.BlobMismatch, match=f"weight {first.package.weights[0].name!r} .*{digest.hash}"):
            executable.local()
    with pytest.raises(local.BlobMismatch, match="the program .*nothing was run"):
        local.verified("the program", first.package.program, b"not the program")


def test_a_runtime_that_differs_falls_back_to_the_daemon(compiled, monkeypatch):
    executable, want = compiled
    here = local.runtime("cpu")
    monkeypatch.setattr(local, "runtime", lambda platform: {**here, "jaxlib_version": "0.0.1"})
    with pytest.warns(RuntimeWarning, match="runs on the daemon, not here: jaxlib_version"):
        run = executable.local()
    assert run.runs == "remote"
    assert run.reason == f"jaxlib_version {here['jaxlib_version']!r} on the daemon, '0.0.1' here"
    assert run.download.received_bytes == 0  # the blobs were not fetched
    assert_close(run(X)[0], want)


def test_a_program_with_a_loop_runs_local(server, client):
    """The daemon runs it in an execution worker (isolation.py); downloaded, it runs in this process."""
    w = np.random.default_rng(2).normal(0, 0.3, (16, 16)).astype(np.float32)

    def fn(x):
        return tf.while_loop(lambda i, h: i < 5, lambda i, h: (i + 1, tf.tanh(h @ w)), (0, x))[1]
    x = np.random.default_rng(3).uniform(-1, 1, (1, 16)).astype(np.float32)
    frozen = freeze(tf.function(fn), tf.TensorSpec(x.shape, tf.float32), lower_control_flow=False)
    executable = client.compile(frozen.graph_def, frozen.feeds, frozen.fetches, name="local_loop")
    assert server.service.loaded(executable.id).executable.isolated
    run = executable.local()
    assert run.runs == "local"
    assert_close(run(x)[0], fn(tf.constant(x)).numpy())


def test_bad_inputs_are_refused_before_the_program_runs(compiled):
    executable, _ = compiled
    run = executable.local()
    with pytest.raises(ValueError, match=r"input .*expected float32\[2, 8, 8, 3\], got float32\[1, 8, 8, 3\]"):
        run(X[:1])
    with pytest.raises(ValueError, match="unknown: \\['y'\\]"):
        run.execute({"y": X})


def test_download_errors(client):
    with pytest.raises(grpc.RpcError) as e:
        list(client.stub.DownloadExecutable(xlacs_pb2.DownloadExecutableRequest(executable_id="nope")))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND and "'nope'" in e.value.details()
    bad = xlacs_pb2.DownloadExecutableRequest(executable_id="nope", have=[xlacs_pb2.Digest(hash="xyz", size_bytes=1)])
    with pytest.raises(grpc.RpcError) as e:
        list(client.stub.DownloadExecutable(bad))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "have[0]" in e.value.details()


def test_an_evicted_executable_compiles_again_before_its_download(frozen_cnn):
    """max_loaded=1: compiling a second graph drops the first one's binding; its download then finds NOT_FOUND,
    compiles it again by digest, and downloads."""
    frozen, want = frozen_cnn
    service = Daemon(Settings(cache_dir="", max_loaded=1))
    server, port, _ = create_server(service, "127.0.0.1:0")
    server.start()
    try:
        with Client(f"127.0.0.1:{port}", timeout=600) as c:
            executable = compile_cnn(c, frozen)
            other = freeze(tf.function(lambda x: x * 2.0), tf.TensorSpec([3], tf.float32))
            c.compile(other.graph_def, other.feeds, other.fetches)
            with pytest.raises(NotFound):
                service.loaded(executable.id)
            run = executable.local()
        assert run.runs == "local" and run.id == executable.id
        assert service.counters.compiles == 2  # the first graph came back from the cache, uncompiled
        assert_close(run(X)[0], want)
    finally:
        server.stop(None)
        service.close()


def test_have_is_bounded_by_max_graph_nodes():
    service = Daemon(Settings(cache_dir="", max_graph_nodes=2))
    server, port, _ = create_server(service, "127.0.0.1:0")
    server.start()
    try:
        with Client(f"127.0.0.1:{port}") as c:
            have = [xlacs_pb2.Digest(hash=f"{i:064x}", size_bytes=1) for i in range(3)]
            with pytest.raises(grpc.RpcError) as e:
                list(c.stub.DownloadExecutable(xlacs_pb2.DownloadExecutableRequest(executable_id="x", have=have)))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_graph_nodes" in e.value.details()
    finally:
        server.stop(None)
        service.close()


def test_the_plain_client_imports_no_jax():
    code = ("import sys, xlacs; xlacs.Client('127.0.0.1:1').close(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
