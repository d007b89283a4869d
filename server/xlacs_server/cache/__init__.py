"""The compilation cache tiers: L1 in process, L2 in Redis, and a local directory."""
