"""Concurrent clients of a served model over the Open Inference Protocol's gRPC (ModelInfer), each sending one
input at a time. The clients are threads spread over processes of their own: one Python process's threads share
its GIL, and gRPC Python's per-call work then caps the load near 500 requests/s whatever the server does (the first
GPU run's batching figures, with and without the batcher, both stopped there)."""
from __future__ import annotations

import multiprocessing
import time

import grpc
import numpy as np

from xlacs_server.inference.v2 import grpc_service_pb2 as kserve
from xlacs_server.inference.v2 import grpc_service_pb2_grpc as kserve_grpc

THREADS_PER_PROCESS = 2


def wait_ready(address: str, deadline: float) -> None:
    stub = kserve_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(address))
    while not stub.ServerReady(kserve.ServerReadyRequest(), timeout=30).ready:
        if time.monotonic() > deadline:
            raise TimeoutError("the model repository did not load in the time left")
        time.sleep(0.5)


def _clients(address: str, model: str, input_name: str, image: np.ndarray, threads: int, start: float,
             seconds: float) -> tuple[list[float], int]:
    """`threads` clients in this process, from the wall-clock `start` for `seconds`: (latencies in ms, failures)."""
    import threading
    request = kserve.ModelInferRequest(model_name=model, inputs=[kserve.ModelInferRequest.InferInputTensor(
        name=input_name, datatype="FP32", shape=list(image.shape))], raw_input_contents=[image.tobytes()])
    stubs = [kserve_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(address)) for _ in range(threads)]
    for stub in stubs:
        stub.ModelInfer(request, timeout=120)  # connected and warm before the start
    latencies, failed = [], [0]
    time.sleep(max(start - time.time(), 0))
    stop = time.monotonic() + seconds

    def client(stub) -> None:
        while time.monotonic() < stop:
            began = time.perf_counter()
            try:
                stub.ModelInfer(request, timeout=120)
            except grpc.RpcError:
                failed[0] += 1
                continue
            latencies.append((time.perf_counter() - began) * 1e3)
    running = [threading.Thread(target=client, args=(stub,)) for stub in stubs]
    for t in running:
        t.start()
    for t in running:
        t.join()
    return latencies, failed[0]


def load(address: str, model: str, input_name: str, image: np.ndarray, clients: int, seconds: float,
         pool) -> dict:
    """`clients` concurrent clients for `seconds`: requests/s, p50 and p99 (ms), failures. `pool` is a spawned
    multiprocessing pool of clients / THREADS_PER_PROCESS processes (`pool_for`)."""
    processes = clients // THREADS_PER_PROCESS
    start = time.time() + 3  # every process connected before the first timed request
    results = pool.starmap(_clients, [(address, model, input_name, image, THREADS_PER_PROCESS, start, seconds)]
                           * processes)
    latencies = np.concatenate([np.array(r[0]) for r in results])
    return {"requests_per_s": len(latencies) / seconds, "p50_ms": float(np.percentile(latencies, 50)),
            "p99_ms": float(np.percentile(latencies, 99)), "requests": int(len(latencies)),
            "failed": sum(r[1] for r in results)}


def pool_for(clients: int):
    return multiprocessing.get_context("spawn").Pool(clients // THREADS_PER_PROCESS)
