"""Stage 4: compile the lowered program through PJRT, keyed for the cache."""
