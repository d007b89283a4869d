"""Stage 3: graph passes. Imports graph/, lower/, unit/ and the top-level config/errors only.

Registered by grouping and phase as in TF's OptimizationPassRegistry. Importing this package registers them all."""
from xlacs_server.passes import (  # noqa: F401
    constant_fold, cse, fold_batch_norm, function_calls, functionalize, infer_shapes, inline, mark_for_compilation,
    prune, remove_identities, winograd)
