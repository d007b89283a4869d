"""Stage 4: tf2xla-style lowering. Imports graph/ and the top-level config/errors/metrics only.

Each TF op has a registered rule, run as symbolic execution over values that are either concrete numpy constants or
traced JAX values; the traced program becomes StableHLO."""
