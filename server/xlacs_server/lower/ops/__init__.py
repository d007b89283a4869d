"""Op lowerings, one module per family; importing this package registers them all."""
from xlacs_server.lower.ops import array, bessel, binary, broadcast, color, control, conv, cpu, fft, gather, grads, image, linalg, lists, math, matrix_diag, nn, pool, quantize, random, reduce, sampling, segment, setops, slicing, sort, space, training, unary, variables, winograd  # noqa: F401
