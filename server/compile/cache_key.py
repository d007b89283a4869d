"""The executable id: a readable graph-name prefix plus a hash of named ingredients, as jax's cache_key."""
import hashlib
import logging
import re

log = logging.getLogger(__name__)

# Bump when the cache entry format or the meaning of an ingredient changes.
CACHE_FORMAT_VERSION = 1


def cache_key(graph_name: str, ingredients: list[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for name, value in ingredients:
        h.update(name.encode())
        h.update(hashlib.sha256(value.encode()).digest())
        log.debug("cache key ingredient %s: %s", name, value[:200])
    prefix = re.sub(r"[^A-Za-z0-9_.-]+", "_", graph_name)[:48] or "graph"
    return f"{prefix}-{h.hexdigest()[:40]}"
