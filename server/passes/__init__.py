"""Stage 2: graph passes, registered by grouping and phase as in TF's OptimizationPassRegistry."""
from xlacs_server.passes import prune  # noqa: F401  (registers the passes)
