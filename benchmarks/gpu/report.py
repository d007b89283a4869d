"""docs/gpu.md's tables from a GPU run's gpu-report.json (check.py): the machine, each graph against TensorFlow,
Execute against the same program in process and against PyTorch, dynamic batching, XLA:GPU options, and the goals
as ratios. Written between the markers of docs/gpu.md, whose prose around them says what the figures mean.

    .venv/bin/python -m benchmarks.gpu.report gpu-report.json [docs/gpu.md]
"""
from __future__ import annotations

import argparse
import json
import pathlib

BEGIN, END = "<!-- gpu-report: begin -->", "<!-- gpu-report: end -->"
TORCH_MODELS = {"MobileNetV2": "mobilenet_v2", "ResNet50": "resnet50"}


def _ms(value) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "–"


def _table(header: list[str], rows: list[list]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(c) for c in row) + " |" for row in rows), ""]


def machine(report: dict) -> list[str]:
    m, torch = report.get("machine", {}), report.get("torch", {})
    return [f"- GPU: {m.get('nvidia_smi', m.get('devices'))}",
            f"- jax {m.get('jax')}, jaxlib {m.get('jaxlib')}, CUDA plugin {m.get('jax-cuda13-plugin', '–')}; "
            f"Python {m.get('python')}, {m.get('cpus')} CPUs",
            f"- PyTorch {torch.get('torch', '–')}, torchvision {torch.get('torchvision', '–')}, cuDNN "
            f"{torch.get('cudnn', '–')}", ""]


def graphs(report: dict) -> list[str]:
    rows = []
    for name, row in report.get("graphs", {}).items():
        if name == "SavedModel" and "batches" in row:
            for batch, b in row["batches"].items():
                rows.append([f"SavedModel (unknown batch) at {batch}", _ms(row["compile_ms"]) if batch == "1" else
                             "(bucket)", f"{b['error']:.1e}", "yes" if b["matches"] else "**no**"])
        elif "error" in row and isinstance(row["error"], str):
            rows.append([name, "–", row["error"][:200].replace("|", "/").replace("\n", " "), "**failed**"])
        else:
            rows.append([name, _ms(row.get("compile_ms")), f"{row['error']:.1e}" if "error" in row else "(timed only)",
                         ("yes" if row["matches"] else "**no**") if "matches" in row else ""])
    return _table(["graph/batch", "cold compile (ms)", "error vs TF CPU", f"within {report.get('tolerance')}"], rows)


def _torch_row(report: dict, model: str, batch: int) -> dict:
    runs = report.get("torch", {}).get("runs", {})
    compiled = report.get("torch_compile", {}).get("runs", {}).get("compiled", {})
    row = {v: runs.get(v, {}).get(model, {}).get(str(batch), {}) for v in ("eager", "eager_tuned")}
    row["compiled"] = compiled.get(model, {}).get(str(batch), {}) if isinstance(compiled.get(model), dict) else {}
    return row


def speed(report: dict) -> list[str]:
    rows = []
    for key, row in report.get("speed", {}).items():
        name, batch = key.split("/b")
        torch = _torch_row(report, TORCH_MODELS[name], int(batch)) if name in TORCH_MODELS else {}
        eager = torch.get("eager", {}).get("host_p50_ms")
        rows.append([key, _ms(row.get("daemon_p50_ms")), _ms(row.get("daemon_shared_memory_p50_ms")),
                     _ms(row.get("in_process_p50_ms")),
                     _ms(row.get("in_process_device_inputs_p50_ms")),
                     f"{row['daemon_vs_in_process']:.2f}×" if "daemon_vs_in_process" in row else row.get(
                         "error", row.get("skipped", ""))[:120],
                     _ms(eager), _ms(torch.get("eager", {}).get("device_p50_ms")),
                     _ms(torch.get("eager_tuned", {}).get("host_p50_ms")),
                     _ms(torch.get("compiled", {}).get("host_p50_ms")),
                     f"{row['daemon_p50_ms'] / eager:.2f}×" if eager and "daemon_p50_ms" in row else "–"])
    return _table(["graph/batch", "daemon Execute", "daemon, shared memory", "in process", "in process, inputs on GPU", "daemon / in process",
                   "PyTorch eager", "eager, on GPU", "eager tuned", "torch.compile", "daemon / eager"], rows)


def batching(report: dict) -> list[str]:
    b = report.get("batching", {})
    if "plain" not in b:
        return [f"Not measured: {b}", ""]
    rows = [[name, f"{b[name]['requests_per_s']:.0f}", _ms(b[name]["p50_ms"]), _ms(b[name]["p99_ms"]),
             b[name]["failed"]] for name in ("plain", "batched")]
    return [*_table(["MobileNetV2, 16 clients", "requests/s", "p50 (ms)", "p99 (ms)", "failed"], rows),
            f"With the batcher: **{b['throughput_ratio']:.2f}×** the throughput without it.", ""]


def options(report: dict) -> list[str]:
    rows = [[key, _ms(row.get("compile_ms")), _ms(row.get("p50_ms")),
             f"{row['difference']:.1e}" if "difference" in row else row.get("error", row.get("skipped", ""))[:150]]
            for key, row in report.get("options", {}).items()]
    return _table(["MobileNetV2 batch/options", "compile (ms)", "run (ms)", "difference from default"], rows)


def goals(report: dict) -> list[str]:
    g = report.get("graphs", {})
    matched = [r.get("matches") for k, r in g.items() if "matches" in r] + \
        [b["matches"] for b in g.get("SavedModel", {}).get("batches", {}).values()]
    lines = [f"- Every graph matches TensorFlow: {sum(bool(m) for m in matched)}/{len(matched)}; daemons' exit "
             f"codes {report.get('daemon_exit')}, {report.get('batching', {}).get('daemon_exit')} (0: no crash)."]
    for key, row in report.get("speed", {}).items():
        name, batch = key.split("/b")
        if batch != "64" or "daemon_vs_in_process" not in row:
            continue
        line = f"- {key}: daemon / in-process JAX **{row['daemon_vs_in_process']:.2f}×** (goal ≤ 1.2×)"
        if "shared_memory_vs_in_process" in row:
            line += f", through shared memory **{row['shared_memory_vs_in_process']:.2f}×**"
        eager = _torch_row(report, TORCH_MODELS[name], 64).get("eager", {}).get("host_p50_ms") \
            if name in TORCH_MODELS else None
        if eager:
            line += f"; daemon / PyTorch eager **{row['daemon_p50_ms'] / eager:.2f}×** (goal ≤ 1.0×)"
        lines.append(line + ".")
    if "throughput_ratio" in report.get("batching", {}):
        lines.append(f"- Dynamic batching at 16 clients: **{report['batching']['throughput_ratio']:.2f}×** "
                     "(goal ≥ 1.5×).")
    return lines + [""]


def render(report: dict) -> str:
    parts = ["### Machine", "", *machine(report), "### Goals", "", *goals(report),
             "### Graphs against TensorFlow", "", *graphs(report), "### Execute (ms, p50)", "", *speed(report),
             "### Dynamic batching", "", *batching(report), "### XLA:GPU options", "", *options(report)]
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("doc", nargs="?", default=str(pathlib.Path(__file__).resolve().parents[2] / "docs/gpu.md"))
    args = parser.parse_args()
    doc = pathlib.Path(args.doc)
    text = doc.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    doc.write_text(f"{head}{BEGIN}\n{render(json.loads(pathlib.Path(args.report).read_text()))}\n{END}{tail}")


if __name__ == "__main__":
    main()
