"""`scripts/gpu-check --prepare [FOLDER]`: makes here, on the CPU, everything the GPU run needs, in FOLDER
(default .gpu-check, which git ignores): the graphs as skeletons (weights.py) with TensorFlow's outputs for them,
a SavedModel with an unknown batch and TensorFlow's outputs, and the wheels for Python 3.12 of what the daemon
needs beside jax (the GPU machine has its own jax with the CUDA plugin, and no fastapi, uvicorn, redis or
zstandard). Checks that the folder and the working tree fit in what a device call carries, then prints the call."""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")  # the oracle's kernels, as in tests/conftest.py

import argparse  # noqa: E402
import importlib.metadata  # noqa: E402
import pathlib  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from packaging.requirements import Requirement  # noqa: E402
from packaging.utils import canonicalize_name  # noqa: E402

from benchmarks.gpu import graphs, weights  # noqa: E402
from benchmarks.gpu.manifest import GraphEntry, Manifest, saved_model_input  # noqa: E402

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
CARRY_LIMIT = 64 << 20  # what one device call carries: the working tree and the carried folder together
# The GPU machine's own: its jax, jaxlib and CUDA plugin, and what they need.
THEIRS = {"jax", "jaxlib", "numpy", "ml-dtypes", "scipy", "opt-einsum"}
TARGET = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
          "platform_system": "Linux", "platform_machine": "x86_64", "platform_python_implementation": "CPython",
          "implementation_name": "cpython", "os_name": "posix"}
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux_2_5_x86_64", "manylinux1_x86_64")


def daemon_distributions() -> dict[str, str]:
    """What `xlacs[server]` installs but THEIRS, at the versions installed here (the ones the suite tests)."""
    found: dict[str, str] = {}
    todo = [(r, "server") for r in importlib.metadata.requires("xlacs")]
    while todo:
        raw, extra = todo.pop()
        requirement = Requirement(raw)
        if requirement.marker and not requirement.marker.evaluate({**TARGET, "extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        if name == "xlacs":
            todo += [(r, e) for e in requirement.extras for r in importlib.metadata.requires("xlacs")]
        elif name not in THEIRS and name not in found:
            found[name] = importlib.metadata.version(name)
            todo += [(r, "") for r in importlib.metadata.requires(name) or []]
    return dict(sorted(found.items()))


def download_wheels(folder: pathlib.Path) -> list[str]:
    folder.mkdir()
    pins = [f"{name}=={version}" for name, version in daemon_distributions().items()]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", *(f"--platform={p}" for p in PLATFORMS),
                    "-d", str(folder), *pins], check=True)
    return sorted(p.name for p in folder.iterdir())


def tf_outputs(graph_def: bytes, entry: GraphEntry, batch: int) -> list[np.ndarray]:
    """TensorFlow graph mode's outputs for the graph's inputs at `batch`."""
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(tf.compat.v1.GraphDef.FromString(graph_def), name="")
    with tf.compat.v1.Session(graph=graph) as session:
        return session.run(entry.fetches, dict(zip(entry.feeds, entry.inputs(batch))))


def prepare_graph(folder: pathlib.Path, graph: graphs.Graph) -> GraphEntry:
    filled, scales = weights.regenerate(graph.frozen.graph_def)
    feeds = {name: (np.dtype(dtype).name, tuple(shape)) for name, (dtype, shape) in graph.frozen.feeds.items()}
    entry = GraphEntry(graph.name, feeds, list(graph.frozen.fetches), scales, list(graph.batches), graph.vocabulary,
                       graph.torchvision)
    (folder / "graphs" / f"{graph.name}.pb").write_bytes(weights.skeleton(filled, scales))
    outputs = tf_outputs(filled, entry, graph.batches[0])
    np.savez(folder / "expected" / f"{graph.name}.npz", **{str(i): a for i, a in enumerate(outputs)})
    return entry


def prepare_saved_model(folder: pathlib.Path) -> None:
    graphs.save_small_cnn(folder / "saved_model")
    serve = tf.saved_model.load(str(folder / "saved_model")).signatures["serving_default"]
    (name,) = serve.structured_input_signature[1]
    expected = {}
    for batch in graphs.SAVED_MODEL_BATCHES:
        for output, value in serve(**{name: tf.constant(saved_model_input(batch))}).items():
            expected[f"{batch}/{output}"] = value.numpy()
    np.savez(folder / "expected" / "SavedModel.npz", **expected)


def tree_bytes() -> int:
    """The working tree as a device call sends it: tracked files, and untracked ones git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPOSITORY,
                            check=True, capture_output=True).stdout.split(b"\0")
    return sum((REPOSITORY / os.fsdecode(p)).stat().st_size for p in listed if p and (REPOSITORY / os.fsdecode(p))
               .is_file())


def folder_bytes(folder: pathlib.Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def prepare(folder: pathlib.Path, made: list[graphs.Graph], wheels: bool = True) -> Manifest:
    """Makes `folder` anew for the graphs `made` (graphs.graphs(): the run's), the SavedModel and the wheels."""
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "graphs").mkdir(parents=True)
    (folder / "expected").mkdir()
    entries = []
    for graph in made:
        entries.append(prepare_graph(folder, graph))
        print(f"{graph.name}: {len(entries[-1].scales)} constants regenerated", flush=True)
    prepare_saved_model(folder)
    manifest = Manifest(entries, list(graphs.SAVED_MODEL_BATCHES), download_wheels(folder / "wheels") if wheels else [])
    manifest.write(folder)
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(REPOSITORY / ".gpu-check"))
    folder = pathlib.Path(parser.parse_args().folder).resolve()
    prepare(folder, graphs.graphs())
    carried, tree = folder_bytes(folder), tree_bytes()
    print(f"{folder}: {carried / 2**20:.1f} MiB, with the working tree's {tree / 2**20:.1f} MiB")
    if carried + tree > CARRY_LIMIT:
        sys.exit(f"{(carried + tree) / 2**20:.1f} MiB is over the {CARRY_LIMIT >> 20} MiB a device call carries")
    relative = folder.relative_to(REPOSITORY)
    print(f"on the GPU machine (the library's device run, carry [\"{relative}\"], timeout_s 560):\n"
          f"    scripts/gpu-check {relative}")


if __name__ == "__main__":
    main()
