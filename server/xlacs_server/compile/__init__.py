"""Stage 5: compile the lowered program through PJRT, keyed for the cache."""
