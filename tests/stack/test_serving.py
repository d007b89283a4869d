"""Through the load balancer of the compose stack: a cold compile of MobileNetV2 that runs as TensorFlow does, the
dashboard and /metrics, and the mounted model repository over the Open Inference Protocol with tritonclient."""
import subprocess

import numpy as np
import pytest

from tests.deploy import files
from tests.inference import tritonclient
from tests.models.keras_models import frozen_keras
from tests.oracle import assert_close

INFER = """
import tritonclient.grpc as grpc_client
import tritonclient.http as http_client
results = {}
for name, module, url in (("http", http_client, args["http"]), ("grpc", grpc_client, args["grpc"])):
    client = module.InferenceServerClient(url)
    headers = {"authorization": "Bearer " + args["token"]}
    given = module.InferInput("x", list(arrays["x"].shape), "FP32")
    given.set_data_from_numpy(arrays["x"])
    assert client.is_model_ready(args["model"], headers=headers), name
    results[name] = client.infer(args["model"], [given], headers=headers).as_numpy("output_0")
reply(arrays=results)
"""


@pytest.fixture(scope="module")
def mobilenet():
    frozen, model = frozen_keras("MobileNetV2", (1, 224, 224, 3))
    x = np.random.default_rng(7).uniform(-1, 1, (1, 224, 224, 3)).astype(np.float32)
    return frozen, x, model(x, training=False).numpy()


def test_a_cold_compile_through_the_load_balancer_runs_mobilenet_v2_as_tensorflow_does(stack, mobilenet):
    frozen, x, want = mobilenet
    with stack.client() as client:
        executable = client.compile(frozen.graph_def, feeds={"x:0": ("float32", x.shape)}, fetches=frozen.fetches)
        assert executable.cache == "miss"
        (got,) = executable(x)
    assert_close(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))
    assert float(want.std()) > 1e-2  # the oracle's outputs are not vanishing (../shared/TESTING.md)
    stack.report["mobilenet_v2_cold_compile_ms"] = round(sum(executable.stage_ms.values()))


def test_the_dashboard_and_metrics_answer_through_the_load_balancer(stack):
    with stack.http_client() as http:
        overview = http.get("/api/overview")
        assert overview.status_code == 200, overview.text
        assert [d for d in overview.json()["devices"] if d["name"] == "cpu:0"], overview.json()["devices"]
        page = http.get("/")
        assert page.status_code == 200 and "xlacs" in page.text
        metrics = http.get("/metrics")
        assert metrics.status_code == 200 and "# TYPE xlacs_compile_seconds histogram" in metrics.text, metrics.text[:2000]
        assert http.get("/v2/health/ready").status_code == 200


def test_the_mounted_model_repository_is_served_through_the_load_balancer_to_tritonclient(stack, tmp_path):
    built = stack.models
    inputs = built.inputs(batch=3)
    got, _ = tritonclient.run(INFER, tmp_path, inputs, http=stack.http, grpc=stack.grpc, token=stack.token,
                              model=built.name)
    want = built.expected(inputs)[built.output]
    for transport in ("http", "grpc"):
        np.testing.assert_allclose(got[transport], want, rtol=1e-5, atol=1e-5, err_msg=transport)


def test_the_load_balancer_reads_its_configuration_without_a_warning(stack):
    lb = files.compose(stack.env)["services"]["lb"]
    source, target, _ = lb["volumes"][0].split(":")
    checked = subprocess.run(["docker", "run", "--rm", "--volume", f"{files.ROOT / source}:{target}:ro", lb["image"],
                              "haproxy", "-c", "-f", target], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0 and "WARNING" not in checked.stdout + checked.stderr, checked.stdout + checked.stderr
