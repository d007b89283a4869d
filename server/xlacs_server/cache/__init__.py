"""The compilation cache. Imports compile/, execute/, passes/ and the top-level config/errors/digest only.

A list of tiers (tiers.py) of one interface (tier.py): L1 in process, L2 in Redis, and a local directory; blobs
beside them (blobs.py)."""
