"""The Kubernetes CPU Deployment's pod, played by Docker with the image the compose stack built: its command, its
ConfigMap's environment, its security context (uid 10001, read-only root, no capabilities), its volumes (the
Secret at /run/secrets/xlacs with mode 0440 and the fsGroup, emptyDirs), on the stack's network where `redis`
resolves. Every port it declares is served and every probe it names answers as Kubernetes would ask it."""
import shutil
import time

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.deploy import files
from tests.stack.conftest import IMAGE_UID, PROJECT, SECRETS, docker

STARTUP_TIMEOUT_S = 180


def pod_container() -> tuple[dict, dict]:
    (deployment,) = [d for d in files.k8s_kind("Deployment") if d["metadata"]["name"] == "xlacs-cpu"]
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    return spec, container


def docker_run_argv(spec: dict, container: dict, secrets_dir) -> list[str]:
    """`docker run` of the pod's one container, as the kubelet would start it."""
    (config_map,) = files.k8s_kind("ConfigMap")
    security = {**spec["securityContext"], **container["securityContext"]}
    assert security["readOnlyRootFilesystem"] and security["capabilities"] == {"drop": ["ALL"]}
    argv = ["run", "-d", "--network", f"{PROJECT}_default",
            "--user", f"{security['runAsUser']}:{security['runAsGroup']}", "--group-add", str(security["fsGroup"]),
            "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
    for source in container["envFrom"]:
        assert source["configMapRef"]["name"] == config_map["metadata"]["name"]
        argv += [a for name, value in config_map["data"].items() for a in ("--env", f"{name}={value}")]
    volumes = {v["name"]: v for v in spec["volumes"]}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "secret" in volume:
            argv += ["--volume", f"{secrets_dir}:{mount['mountPath']}:ro"]
        else:
            assert volume == {"name": mount["name"], "emptyDir": {}}, volume
            argv += ["--tmpfs", f"{mount['mountPath']}:uid={IMAGE_UID},gid={IMAGE_UID}"]
    return argv + [container["image"], *container["args"]]


def secret_volume(spec: dict, directory) -> None:
    """The Secret xlacs-secrets as the kubelet mounts it: its keys as files of defaultMode, group fsGroup."""
    (volume,) = [v for v in spec["volumes"] if "secret" in v]
    directory.mkdir()
    for name in ("cache_secret", "auth_tokens"):
        shutil.copy(SECRETS / name, directory / name)
        shutil.chown(directory / name, 0, spec["securityContext"]["fsGroup"])
        (directory / name).chmod(volume["secret"]["defaultMode"])


def test_the_cpu_deployments_pod_serves_every_port_and_probe_it_declares(stack, tmp_path):
    spec, container = pod_container()
    assert container["image"] == files.compose()["services"]["xlacs"]["image"]  # the image the stack built
    secret_volume(spec, tmp_path / "secrets")
    pod = docker(*docker_run_argv(spec, container, tmp_path / "secrets")).strip()
    try:
        address = stack.ip(pod)
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        startup = container["startupProbe"]["grpc"]
        with grpc.insecure_channel(f"{address}:{startup['port']}") as channel:
            check = health_pb2_grpc.HealthStub(channel).Check
            start = time.monotonic()
            while True:
                try:
                    answer = check(health_pb2.HealthCheckRequest(service=startup["service"]), timeout=5)
                    if answer.status == health_pb2.HealthCheckResponse.SERVING:
                        break
                except grpc.RpcError as e:
                    assert e.code() == grpc.StatusCode.UNAVAILABLE, e
                assert time.monotonic() - start < STARTUP_TIMEOUT_S, docker("logs", pod)
                time.sleep(0.5)
        assert startup["port"] == ports["grpc"]
        for probe in ("readinessProbe", "livenessProbe"):
            get = container[probe]["httpGet"]
            url = f"http://{address}:{ports[get['port']]}{get['path']}"
            answer = httpx.get(url, timeout=container[probe].get("timeoutSeconds", 1))
            assert answer.status_code == 200, (probe, url, answer.text)
        with stack.client(f"{address}:{ports['grpc']}") as client:  # the ConfigMap's Redis, secret and tokens
            assert {t.tier for t in client.stats().tiers} >= {"l1", "l2"}
    finally:
        logs = docker("logs", pod)
        docker("rm", "-f", pod)
    assert "Traceback" not in logs, logs
