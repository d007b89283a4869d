"""The sizes an unknown dimension is padded to: a request's explicit list, or the powers of two up to the daemon's
max_bucket_size; and the bucket a size falls in."""
from __future__ import annotations

import bisect
from typing import Sequence

from xlacs_server.errors import InvalidRequest, LimitExceeded


def bucket_sizes(requested: Sequence[int], max_bucket_size: int) -> tuple[int, ...]:
    """The request's bucket_sizes, checked, or the powers of two up to max_bucket_size when it gives none."""
    if not requested:
        return tuple(1 << i for i in range(max_bucket_size.bit_length()))
    sizes = tuple(int(s) for s in requested)
    if sizes[0] < 1 or any(a >= b for a, b in zip(sizes, sizes[1:])):
        raise InvalidRequest(f"bucket_sizes {list(sizes)} must be positive and strictly ascending")
    if sizes[-1] > max_bucket_size:
        raise LimitExceeded(f"bucket_sizes go up to {sizes[-1]}", "max_bucket_size", max_bucket_size)
    return sizes


def bucket_of(size: int, sizes: tuple[int, ...]) -> int | None:
    """The smallest bucket that holds `size`, or None past the largest."""
    index = bisect.bisect_left(sizes, size)
    return sizes[index] if index < len(sizes) else None


def probe_sizes(sizes: tuple[int, ...]) -> tuple[int, int]:
    """Two sizes the output shapes are inferred at: the two largest buckets, whose dims are least likely to equal
    a static dim of the model by chance (with one bucket, it and twice it; nothing compiles at either)."""
    return (sizes[-2], sizes[-1]) if len(sizes) > 1 else (sizes[0], 2 * sizes[0])
