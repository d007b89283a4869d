"""Stage 5: PJRT compile, keyed for the cache. Imports execute/, lower/, unit/, graph/, top-level metrics/version."""
