"""Op lowerings, one module per family; importing this package registers them all."""
from xlacs_server.lower.ops import array, binary, broadcast, gather, math, nn, reduce, setops, slicing, sort, space, unary  # noqa: F401
