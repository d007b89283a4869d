"""TensorFlow Serving's Predict against the Open Inference Protocol's ModelInfer on the same served model (issue 34's
goal: Predict at most 1.1x ModelInfer, docs/tf_serving.md): the repository's small GraphDef model
(tests/model_repository.py: 4 floats in, 3 out, max_batch_size 8, no batcher), batch 1, served by a daemon in this
process. Two ways, each API in turn within every round so that the machine's load weighs on both alike: the servicers
called in process (no transport: what each API's translation costs around the same ServedModel.infer), and round trips
over loopback from the official clients (tensorflow-serving-api's stubs with tf.make_tensor_proto in and
tf.make_ndarray out; tritonclient.grpc), each in its own venv and process, timing its own calls.

    .venv/bin/python -m benchmarks.tfserving [--requests 300] [--rounds 2]
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from xlacs import dtypes  # noqa: E402
from xlacs.v1 import tf_graph_pb2  # noqa: E402

from tests.inference import tritonclient  # noqa: E402
from tests.model_repository import Context, ModelServer, graphdef_model  # noqa: E402
from tests.tfserving import client as tfserving_client  # noqa: E402
from xlacs_server.inference.grpc_servicer import InferenceServicer  # noqa: E402
from xlacs_server.inference.v2 import grpc_service_pb2  # noqa: E402
from xlacs_server.tfserving.apis import predict_pb2  # noqa: E402
from xlacs_server.tfserving.servicer import PredictionServicer  # noqa: E402

MODEL = "keras_gd"
WARM_UP = 30

# Each client script sends `requests` after WARM_UP, one at a time, and replies with the seconds of each.
TFSERVING_LOOP = '''
import time
x = np.random.default_rng(0).uniform(-1, 1, (1, 4)).astype(np.float32)
times = []
for i in range(args["warm_up"] + args["requests"]):
    start = time.perf_counter()
    r = predict_pb2.PredictRequest()
    r.model_spec.name = args["model"]
    r.inputs["x"].CopyFrom(tf.make_tensor_proto(x))
    tf.make_ndarray(predict.Predict(r, timeout=60).outputs["Identity"])
    times.append(time.perf_counter() - start)
reply(arrays={"seconds": np.array(times[args["warm_up"]:])})
'''
TRITON_LOOP = '''
import time
import tritonclient.grpc as grpcclient
client = grpcclient.InferenceServerClient(args["url"])
x = np.random.default_rng(0).uniform(-1, 1, (1, 4)).astype(np.float32)
times = []
for i in range(args["warm_up"] + args["requests"]):
    start = time.perf_counter()
    given = grpcclient.InferInput("x", [1, 4], "FP32")
    given.set_data_from_numpy(x)
    client.infer(args["model"], [given]).as_numpy("Identity")
    times.append(time.perf_counter() - start)
reply(arrays={"seconds": np.array(times[args["warm_up"]:])})
'''


def _in_process_calls(daemon, requests: int, order: tuple[str, ...]) -> dict[str, list[float]]:
    """The seconds of each of `requests` calls of each servicer's method (after WARM_UP), one API after the other."""
    x = np.random.default_rng(0).uniform(-1, 1, (1, 4)).astype(np.float32)
    predict = predict_pb2.PredictRequest()
    predict.model_spec.name = MODEL
    predict.inputs["x"].CopyFrom(tf_graph_pb2.TensorProto(  # what tf.make_tensor_proto writes for an array
        dtype=dtypes.from_numpy(x.dtype), tensor_shape={"dim": [{"size": 1}, {"size": 4}]}, tensor_content=x.tobytes()))
    infer = grpc_service_pb2.ModelInferRequest(model_name=MODEL, raw_input_contents=[x.tobytes()], inputs=[
        grpc_service_pb2.ModelInferRequest.InferInputTensor(name="x", datatype="FP32", shape=[1, 4])])
    predictions, inference = PredictionServicer(daemon), InferenceServicer(daemon)
    calls = {"predict": lambda: predictions.Predict(predict, Context()),
             "model_infer": lambda: inference.ModelInfer(infer, Context())}
    times = {}
    for name in order:
        seconds = []
        for _ in range(WARM_UP + requests):
            start = time.perf_counter()
            calls[name]()
            seconds.append(time.perf_counter() - start)
        times[name] = seconds[WARM_UP:]
    return times


def _round_trips(server, directory: pathlib.Path, requests: int, order: tuple[str, ...]) -> dict[str, list[float]]:
    common = {"url": server.grpc_address, "model": MODEL, "warm_up": WARM_UP, "requests": requests}
    clients = {"predict": (tfserving_client.run, TFSERVING_LOOP), "model_infer": (tritonclient.run, TRITON_LOOP)}
    times = {}
    for name in order:
        run, script = clients[name]
        arrays, _ = run(script, directory / name, **common)
        times[name] = arrays["seconds"].tolist()
    return times


def _figures(samples: list[list[float]]) -> dict:
    """Per round: the median and 90th percentile in ms."""
    return {"p50_ms": [float(np.percentile(s, 50) * 1e3) for s in samples],
            "p90_ms": [float(np.percentile(s, 90) * 1e3) for s in samples]}


def measure(directory: pathlib.Path, requests: int, rounds: int) -> dict:
    """For each way (in_process, round_trip) and API (predict, model_infer): the p50 and p90 of each round (ms), and
    Predict's p50 over ModelInfer's, of the medians over the rounds; the load average before and after."""
    repo = directory / "models"
    graphdef_model(repo, MODEL)
    started, load_before = time.strftime("%Y-%m-%d %H:%M:%S %Z"), os.getloadavg()
    samples = {way: {"predict": [], "model_infer": []} for way in ("in_process", "round_trip")}
    with ModelServer(repo) as server:
        for i in range(rounds):
            order = ("predict", "model_infer")[::1 if i % 2 == 0 else -1]  # each API first in every other round
            for way, times in (("in_process", _in_process_calls(server.service, requests, order)),
                               ("round_trip", _round_trips(server, directory / f"round-{i}", requests, order))):
                for api, seconds in times.items():
                    samples[way][api].append(seconds)
    results = {"model": MODEL, "requests": requests, "warm_up": WARM_UP, "rounds": rounds,
               "started": started, "load_average": [load_before, os.getloadavg()]}
    for way, by_api in samples.items():
        results[way] = {api: _figures(s) for api, s in by_api.items()}
        medians = {api: float(np.median([np.percentile(s, 50) for s in by_api[api]])) for api in by_api}
        results[way]["ratio"] = medians["predict"] / medians["model_infer"]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="timed requests per API, way and round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    directory = pathlib.Path(tempfile.mkdtemp(prefix="xlacs-bench-tfserving-"))
    print(json.dumps(measure(directory, args.requests, args.rounds), indent=1))


if __name__ == "__main__":
    main()
