"""The daemon's version, reported by GetStats and part of the cache key (cache_key.code_identity)."""
from importlib import metadata

try:
    VERSION = metadata.version("xlacs")
except metadata.PackageNotFoundError:
    VERSION = "0+unknown"
