"""Runs client scripts with TensorFlow Serving's official Python API (tensorflow-serving-api's stubs, with TensorFlow
for make_tensor_proto and make_ndarray), in the venv scripts/bootstrap makes for it (.venv-tfserving: the stubs need
the `tensorflow` package, whose distribution must not sit beside tensorflow-cpu in .venv). A script gets `arrays`
and `args` and replies as tests/inference/tritonclient.py's do; CLIENT gives it the two stubs and `failure`.

The scripts run one at a time in one long-lived client process (WORKER), not one process each: importing TensorFlow,
which the stubs' protos import whole, takes seconds of CPU, and tests make dozens of calls. Each script gets a fresh
namespace and its own channel (closed after it); its stdout and stderr go to its work_dir/stderr.txt, which a failing
script, a crashed client and a timeout report. The client exits when the test process does (its stdin closes)."""
from __future__ import annotations

import atexit
import json
import pathlib
import select
import subprocess
import threading

from tests.inference import tritonclient

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv-tfserving" / "bin" / "python"

CLIENT = '''
import grpc
import tensorflow as tf
from google.protobuf import json_format
from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2, model_management_pb2,
                                     model_service_pb2_grpc, predict_pb2, prediction_service_pb2_grpc,
                                     classification_pb2, regression_pb2, inference_pb2)
channel = grpc.insecure_channel(args["url"])
predict = prediction_service_pb2_grpc.PredictionServiceStub(channel)
model_service = model_service_pb2_grpc.ModelServiceStub(channel)
def failure(call, *a, **k):
    try:
        call(*a, timeout=120, **k)
        return None
    except grpc.RpcError as e:
        return [e.code().name, e.details()]
def as_dict(message):
    return json_format.MessageToDict(message, preserving_proto_field_name=True)
'''


WORKER = '''
import json, os, sys, traceback
answers, log = os.fdopen(os.dup(1), "w"), os.dup(2)
while line := sys.stdin.readline():
    source, work = json.loads(line)
    sys.argv, namespace, ok = [source, work], {"__name__": "__main__", "__file__": source}, False
    with open(os.path.join(work, "stderr.txt"), "w") as err:
        os.dup2(err.fileno(), 1), os.dup2(err.fileno(), 2)
        try:
            exec(compile(open(source).read(), source, "exec"), namespace)
            ok = True
        except BaseException:
            traceback.print_exc()
        finally:
            if "channel" in namespace:
                namespace["channel"].close()
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(log, 1), os.dup2(log, 2)
    answers.write("ok\\n" if ok else "failed\\n")
    answers.flush()
'''
_worker: subprocess.Popen | None = None
_lock = threading.Lock()  # one script at a time


def run(script: str, work_dir: pathlib.Path, arrays=None, **args):
    """(arrays, result) the script (after CLIENT) replied with. Raises tritonclient.ClientScriptFailed with the
    script's stderr if it raises, the client crashes or no answer comes in tritonclient.TIMEOUT_S."""
    source = tritonclient.prepare(CLIENT + script, work_dir, arrays, PYTHON, args)
    with _lock:
        answer = _ask(source, work_dir)
    if answer != "ok\n":
        stderr = work_dir / "stderr.txt"
        said = stderr.read_text()[-4000:] if stderr.exists() else ""
        how = "failed" if answer == "failed\n" else "crashed or timed out"
        raise tritonclient.ClientScriptFailed(f"client script {how}:\n{said}")
    return tritonclient.replied(work_dir)


def _ask(source: pathlib.Path, work_dir: pathlib.Path) -> str:
    """The worker's answer to running source: "ok\n", "failed\n", or "" (it crashed or timed out, and is gone)."""
    global _worker
    if _worker is None:
        _worker = subprocess.Popen([str(PYTHON), "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True)
    try:
        _worker.stdin.write(json.dumps([str(source), str(work_dir)]) + "\n")
        _worker.stdin.flush()
        ready, _, _ = select.select([_worker.stdout], [], [], tritonclient.TIMEOUT_S)
        answer = _worker.stdout.readline() if ready else ""
    except BrokenPipeError:
        answer = ""
    if not answer:
        _stop()
    return answer


@atexit.register
def _stop() -> None:
    global _worker
    if _worker is not None:
        _worker.kill()
        _worker.wait()
        _worker = None
