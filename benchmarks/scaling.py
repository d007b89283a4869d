"""Cost growth: cold compile time, executable size and the server's memory growth against graph size (nodes)
and against weight bytes, with weight lifting (the default) and without (lift_threshold_bytes=0)."""
from __future__ import annotations

import pathlib

from benchmarks import models
from benchmarks.processes import ServeProcess
from benchmarks.timing import timed_result

LIFTING = {"lifted": {}, "embedded": {"XLACS_LIFT_THRESHOLD_BYTES": "0"}}


def _cold_compile(server: ServeProcess, client, model: models.Model) -> dict:
    rss_before = server.rss_mib()
    ms, executable = timed_result(lambda: model.compile(client))
    if executable.cache != "miss":
        raise RuntimeError(f"{model.name}: a scaling graph must compile cold, the server answered {executable.cache}")
    executable(*model.inputs)  # the memory of a loaded executable includes its first run's buffers
    return {"compile_ms": ms, "stage_ms": executable.stage_ms,
            "executable_bytes": client.executable_info(executable.id).size_bytes,
            "rss_growth_mib": server.rss_mib() - rss_before}


def measure(directory: pathlib.Path, layer_counts: list[int], weight_mb: list[int]) -> dict:
    graphs = [("nodes", models.dense_chain(n)) for n in layer_counts] + \
             [("weights", models.wide_dense(mb * models.MB)) for mb in weight_mb]
    rows = [{"family": family, "graph": m.name, "nodes": models.node_count(m.frozen),
             "graph_bytes": len(m.frozen.graph_def)} for family, m in graphs]
    for label, env in LIFTING.items():
        server = ServeProcess(directory, env)
        try:
            server.warm_up(models.tiny_add())
            with server.client() as client:
                for row, (_, model) in zip(rows, graphs):
                    row[label] = _cold_compile(server, client, model)
        finally:
            server.stop()
    return {"rows": rows}
