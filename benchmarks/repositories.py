"""The model repository the batching benchmarks serve (docs/model_repository.md, docs/batching.md): one frozen image
classifier as two models, the same graph without and with dynamic_batching. Imports no TensorFlow: the GPU run
(benchmarks/gpu) writes it on a machine without it."""
from __future__ import annotations

import pathlib


def write_batching_pair(repo: pathlib.Path, graph_def: bytes, feed: str, fetch: str, names: tuple[str, str],
                        max_batch_size: int, queue_delay_us: int) -> str:
    """Writes models `names` (without, with the batcher) of `graph_def` (float32 [-1, 224, 224, 3] in at `feed`,
    [-1, 1000] out at `fetch`) into `repo`; returns the input's name."""
    input_name, output_name = feed.split(":")[0], fetch.split(":")[0]
    batchers = ("", f"dynamic_batching {{ max_queue_delay_microseconds: {queue_delay_us} }}")
    for name, batching in zip(names, batchers, strict=True):
        (repo / name / "1").mkdir(parents=True, exist_ok=True)
        (repo / name / "1" / "model.graphdef").write_bytes(graph_def)
        (repo / name / "config.pbtxt").write_text(
            f'platform: "tensorflow_graphdef"\nmax_batch_size: {max_batch_size}\n'
            f'input [{{ name: "{input_name}" data_type: TYPE_FP32 dims: [224, 224, 3] }}]\n'
            f'output [{{ name: "{output_name}" data_type: TYPE_FP32 dims: [1000] }}]\n{batching}\n')
    return input_name
