"""Issue 36: XLA:GPU on a lent GPU machine, checked and measured in one short run (scripts/gpu-check, docs/gpu.md).

`scripts/gpu-check --prepare` makes here, with TensorFlow, everything that run needs in one folder: the graphs as
skeletons (weights.py), TensorFlow's outputs for them, a SavedModel, and the wheels the machine lacks
(prepare.py). On the GPU machine, which has no TensorFlow and fetches nothing, `scripts/gpu-check FOLDER` fills the
graphs' weights back in and runs the checks (check.py), with PyTorch as the peer (torch_peer.py), and writes the
report (report.py renders docs/gpu.md from it)."""
