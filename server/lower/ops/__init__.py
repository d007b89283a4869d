"""Op lowerings, one module per family; importing this package registers them all."""
from xlacs_server.lower.ops import array, math, nn  # noqa: F401
