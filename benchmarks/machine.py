"""What the numbers were measured on: CPU, cores, memory, OS, package versions and the commit."""
from __future__ import annotations

import importlib.metadata
import os
import pathlib
import platform
import subprocess

PACKAGES = ("jax", "jaxlib", "tensorflow-cpu", "tf2jax", "openvino", "onnxruntime", "tf2onnx", "onnx", "grpcio",
            "protobuf", "numpy", "xlacs")


def _cpu_model() -> str:
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _memory_gib() -> float:
    for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / (1 << 20)
    return 0.0


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _commit(root: pathlib.Path) -> str:
    result = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"],
                            capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def describe(root: pathlib.Path) -> dict:
    return {
        "cpu": _cpu_model(), "cores": os.cpu_count(), "memory_gib": round(_memory_gib(), 1),
        "os": platform.platform(), "python": platform.python_version(), "host": platform.node(),
        "versions": {p: _version(p) for p in PACKAGES}, "commit": _commit(root),
    }


def as_markdown(machine: dict) -> str:
    versions = ", ".join(f"{p} {v}" for p, v in machine["versions"].items())
    return (f"{machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB of memory; "
            f"{machine['os']}; Python {machine['python']}; {versions}; xlacs commit {machine['commit']}.")
