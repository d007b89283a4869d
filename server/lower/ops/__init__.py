"""Op lowerings, one module per family; importing this package registers them all."""
from xlacs_server.lower.ops import array, binary, broadcast, control, conv, cpu, gather, grads, lists, math, nn, pool, quantize, reduce, setops, slicing, sort, space, unary  # noqa: F401
