"""What the numbers were measured on: CPU, cores, memory, OS, package versions and the commit."""
from __future__ import annotations

import importlib.metadata
import os
import pathlib
import platform
import subprocess

PACKAGES = ("jax", "jaxlib", "tensorflow-cpu", "tf2jax", "openvino", "onnxruntime", "tf2onnx", "onnx", "grpcio",
            "protobuf", "numpy", "xlacs")


# The vector extensions that decide which kernels XLA:CPU, oneDNN and MLAS run (cpuinfo's flag -> its name).
VECTOR_EXTENSIONS = {"avx2": "AVX2", "avx512f": "AVX-512", "avx512_vnni": "AVX-512 VNNI", "avx512_bf16": "AVX-512 BF16",
                     "amx_tile": "AMX"}


def _cpu(cpuinfo: str) -> str:
    """The first processor of /proc/cpuinfo's text as its name, family and model, and its vector extensions: machines
    of one kind sold under one name ("AMD EPYC") differ in these, and the ratios with them."""
    fields = {}
    for line in cpuinfo.split("\n\n")[0].splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    name = fields.get("model name") or platform.processor() or platform.machine()
    flags = set(fields.get("flags", "").split())
    extensions = [label for flag, label in VECTOR_EXTENSIONS.items() if flag in flags]
    family = f" (family {fields['cpu family']}, model {fields['model']})" if "cpu family" in fields else ""
    return f"{name}{family}, {', '.join(extensions) or 'no AVX2'}"


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
        "cpu": _cpu(pathlib.Path("/proc/cpuinfo").read_text()), "cores": os.cpu_count(),
        "memory_gib": round(_memory_gib(), 1),
        "os": platform.platform(), "python": platform.python_version(), "host": platform.node(),
        "versions": {p: _version(p) for p in PACKAGES}, "commit": _commit(root),
    }


def as_markdown(machine: dict) -> str:
    versions = ", ".join(f"{p} {v}" for p, v in machine["versions"].items())
    return (f"{machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB of memory; "
            f"{machine['os']}; Python {machine['python']}; {versions}; xlacs commit {machine['commit']}.")
