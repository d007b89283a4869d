"""The compilation cache: a list of tiers (tiers.py) of one interface (tier.py): L1 in process, L2 in Redis, and
a local directory."""
