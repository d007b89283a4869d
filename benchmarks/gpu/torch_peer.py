"""PyTorch on the same GPU, in a process of its own (the GPU machine's python3 has torch and torchvision): the
torchvision models a GPU user would run instead of a frozen Keras CNN, with random weights, in eval mode, fp32.

- `eager`: PyTorch's defaults (cuDNN may use TF32 for convolutions, as it does by default).
- `eager_tuned`: channels_last and cudnn.benchmark, what a user tuning for speed turns on.
- `compiled`: torch.compile of the tuned model, while `--deadline` allows.
Each is timed two ways: from host arrays to host arrays, as an Execute of numpy inputs is, and on the device alone.
Writes its figures to `--out` (JSON) after every one, so that a run stopped at its deadline keeps what it measured.

    python3 -m benchmarks.gpu.torch_peer --out torch.json [--variants eager,eager_tuned,compiled]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import time

import numpy as np
import torch
import torchvision

from benchmarks.timing import calls_for

SIZE = 224


def measure(model, batch: int, seconds: float, channels_last: bool) -> dict:
    host = np.random.default_rng(0).uniform(-1, 1, (batch, 3, SIZE, SIZE)).astype(np.float32)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    device_input = torch.from_numpy(host).cuda().to(memory_format=layout)

    def host_to_host():
        with torch.inference_mode():
            return model(torch.from_numpy(host).cuda().to(memory_format=layout)).cpu().numpy()

    def on_device():
        with torch.inference_mode():
            model(device_input)
        torch.cuda.synchronize()
    start = time.perf_counter()
    host_to_host()  # the first call: cuDNN's choices, torch.compile's compile
    first_ms = (time.perf_counter() - start) * 1e3
    for _ in range(3):
        host_to_host()
    return {"first_call_ms": first_ms, "host_p50_ms": float(np.median(calls_for(host_to_host, seconds, 5))),
            "device_p50_ms": float(np.median(calls_for(on_device, seconds, 5)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--models", default="mobilenet_v2,resnet50")
    parser.add_argument("--batches", default="1,64")
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--variants", default="eager,eager_tuned")
    parser.add_argument("--deadline", type=float, default=600, help="no new torch.compile after these seconds")
    args = parser.parse_args()
    deadline = time.monotonic() + args.deadline
    out = pathlib.Path(args.out)
    figures = {"torch": torch.__version__, "torchvision": torchvision.__version__, "cudnn": torch.backends.cudnn.version(),
               "device": torch.cuda.get_device_name(0), "runs": {}}
    models = {name: getattr(torchvision.models, name)(weights=None).eval().cuda() for name in args.models.split(",")}
    batches = [int(b) for b in args.batches.split(",")]
    for variant in args.variants.split(","):
        tuned = variant != "eager"
        torch.backends.cudnn.benchmark = tuned
        for name, model in models.items():
            if variant == "compiled" and time.monotonic() > deadline:
                figures["runs"].setdefault(variant, {})[name] = "not run: out of time"
                continue
            model = model.to(memory_format=torch.channels_last) if tuned else model
            model = torch.compile(model) if variant == "compiled" else model
            for batch in batches:
                try:
                    row = measure(model, batch, args.seconds, tuned)
                except Exception as e:  # noqa: BLE001 - a peer that fails is a row that says why
                    row = {"error": f"{type(e).__name__}: {e}"[:500]}
                figures["runs"].setdefault(variant, {}).setdefault(name, {})[str(batch)] = row
                out.write_text(json.dumps(figures, indent=1))
    out.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
