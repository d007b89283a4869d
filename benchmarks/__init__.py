"""The side-by-side benchmark suite: `scripts/bench` runs `python -m benchmarks.run` (see README, Benchmarks)."""
