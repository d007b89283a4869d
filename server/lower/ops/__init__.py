"""Op lowerings, one module per family; importing this package registers them all."""
from xlacs_server.lower.ops import array, math, nn, slicing  # noqa: F401
