"""The GPU image, built as `docker compose --profile gpu build xlacs-gpu` builds it (JAX's CUDA plugin and the CUDA
libraries from pip: several GB), started on this machine, which has no GPU: it stops at once saying so, and what to
do, without a traceback."""
import subprocess
import time


IMAGE = "xlacs:gpu"


def test_the_gpu_image_builds_and_without_a_gpu_says_so_and_exits(stack):
    start = time.monotonic()
    stack.compose("--profile", "gpu", "build", "xlacs-gpu", timeout=1800)
    stack.report["gpu_image_build_s"] = round(time.monotonic() - start, 1)
    stack.report["gpu_image_bytes"] = stack.inspect(IMAGE)["Size"]
    run = subprocess.run(["docker", "run", "--rm", IMAGE], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "xlacs serve: no GPU: " in run.stderr and "XLACS_REQUIRE_GPU=0" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    with_cpu = subprocess.run(["docker", "run", "--rm", "-e", "XLACS_REQUIRE_GPU=0", "--entrypoint", "python", IMAGE,
                               "-c", "from xlacs_server.execute.devices import enumerate_devices; "
                               "print([d.name for d in enumerate_devices()])"],
                              capture_output=True, text=True, timeout=300)
    assert with_cpu.returncode == 0 and with_cpu.stdout.strip() == "['cpu:0']", with_cpu.stderr
