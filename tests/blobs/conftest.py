"""Compiles by digest over real gRPC: a two-layer TF graph whose weights are cut into blobs by the client's
splitter (xlacs.manifest), uploaded with the raw stub, and compared with TensorFlow's outputs."""
from __future__ import annotations

import dataclasses

import grpc
import numpy as np
import pytest
import tensorflow as tf
from grpc_status import rpc_status

from tests.cache.conftest import SECRET
from tests.conftest import RunningServer
from xlacs import digests, dtypes, manifest, tensors
from xlacs.freeze import freeze
from xlacs.v1 import xlacs_pb2, xlacs_pb2_grpc
from xlacs_server.config import Settings

X = np.random.default_rng(7).standard_normal((2, 32)).astype(np.float32)


@dataclasses.dataclass
class BlobGraph:
    """A frozen graph, its digest, its manifest and the blobs it names (by (hash, size)), and TF's outputs."""
    graph_def: bytes
    feeds: dict
    fetches: list
    digest: xlacs_pb2.Digest
    manifest: xlacs_pb2.GraphManifest
    blobs: dict
    want: np.ndarray

    def request(self, with_manifest: bool = False, **fields) -> xlacs_pb2.CompileRequest:
        request = xlacs_pb2.CompileRequest(
            feeds=[xlacs_pb2.TensorSpec(name=n, dtype=dtypes.from_numpy(np.dtype(d)), shape=s)
                   for n, (d, s) in self.feeds.items()], fetches=self.fetches, graph_digest=self.digest, **fields)
        if with_manifest:
            request.graph_manifest.CopyFrom(self.manifest)
        return request

    def digests(self) -> list[xlacs_pb2.Digest]:
        return [xlacs_pb2.Digest(hash=h, size_bytes=s) for h, s in self.blobs]


def two_layers(seed: int, second: float = 0.5) -> BlobGraph:
    """tanh(x @ w1) @ w2 + b: w1 (32x64) and w2 (64x16) are cut as blobs; another seed is another checkpoint of
    the same architecture (the same program once the weights are lifted)."""
    rng = np.random.default_rng(seed)
    w1 = tf.constant(rng.standard_normal((32, 64)).astype(np.float32) / 6)
    w2 = tf.constant(rng.standard_normal((64, 16)).astype(np.float32) * second)

    def model(x):
        return tf.matmul(tf.tanh(tf.matmul(x, w1)), w2) + 0.25
    frozen = freeze(tf.function(model), tf.TensorSpec((2, 32), tf.float32))
    graph_manifest, blobs = manifest.split(frozen.graph_def).manifest()
    assert len(graph_manifest.cuts) == 2
    return BlobGraph(frozen.graph_def, frozen.feeds, frozen.fetches, digests.digest(frozen.graph_def),
                     graph_manifest, {k: bytes(v) for k, v in blobs.items()}, model(X).numpy())


def upload(stub, blobs: dict, chunk_bytes: int = 1000) -> xlacs_pb2.UploadBlobsResponse:
    """Uploads each blob in chunks of `chunk_bytes`."""
    def chunks():
        for (h, size), data in blobs.items():
            for offset in range(0, max(size, 1), chunk_bytes):
                yield xlacs_pb2.BlobChunk(digest=xlacs_pb2.Digest(hash=h, size_bytes=size), offset=offset,
                                          data=data[offset:offset + chunk_bytes])
    return stub.UploadBlobs(chunks())


def execute(stub, executable_id: str) -> np.ndarray:
    response = stub.Execute(xlacs_pb2.ExecuteRequest(executable_id=executable_id,
                                                     inputs=[tensors.to_proto("x:0", X)]))
    return tensors.from_proto(response.outputs[0])


def failure(call) -> tuple[grpc.StatusCode, str, list]:
    """(code, message, MissingBlobs digests as (hash, size)) of a call that must fail."""
    with pytest.raises(grpc.RpcError) as raised:
        call()
    missing = []
    for packed in rpc_status.from_call(raised.value).details:
        if packed.Is(xlacs_pb2.MissingBlobs.DESCRIPTOR):
            detail = xlacs_pb2.MissingBlobs()
            packed.Unpack(detail)
            missing += [(d.hash, d.size_bytes) for d in detail.digests]
    return raised.value.code(), raised.value.details(), missing


def tiers(stats, field: str = "blob_tiers") -> dict:
    return {t.tier: t for t in getattr(stats, field)}


@pytest.fixture
def replica(redis_server):
    """Starts in-process daemons sharing `redis_server`, each a fresh replica; stops them at the end."""
    started = []

    def start(**overrides) -> tuple[RunningServer, xlacs_pb2_grpc.CompilerStub]:
        running = RunningServer(Settings(**{"cache_dir": "", "redis_url": redis_server.url, "cache_secret": SECRET,
                                            **overrides}))
        channel = grpc.insecure_channel(running.address)
        started.append((running, channel))
        return running, xlacs_pb2_grpc.CompilerStub(channel)
    yield start
    for running, channel in started:
        channel.close()
        running.stop()
