"""The daemon's version, reported by GetStats."""
from importlib import metadata

try:
    VERSION = metadata.version("xlacs")
except metadata.PackageNotFoundError:
    VERSION = "0+unknown"
