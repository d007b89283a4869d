"""Reads an SSTable, the immutable sorted key-value file of LevelDB that TensorFlow writes as a TensorBundle's
index (tensorflow/core/lib/io/table_format.h, LevelDB's doc/table_format.md).

A table is data blocks, a metaindex block, an index block and a 48-byte footer: the metaindex's and the index's
block handles (varint64 offset and size), padding, and the magic number. The index maps the last key of each
data block to that block's handle. A block holds entries whose keys share a prefix with the entry before
(varint32 shared, non-shared and value lengths, then the key's non-shared bytes and the value), then the offsets
of its restart points (uint32 each) and their count. Each block is followed by a 5-byte trailer: its compression
type and a CRC32C. TensorFlow writes bundles uncompressed."""
from __future__ import annotations

import struct
from typing import Iterator

from xlacs import wire

MAGIC = 0xDB4775248B80FB57
FOOTER_BYTES = 48
TRAILER_BYTES = 5
NO_COMPRESSION = 0


class TableError(ValueError):
    """The bytes are not an SSTable, or one that this reader does not read (a compressed block)."""


def read_varint(data: memoryview, pos: int) -> tuple[int, int]:
    try:
        return wire.read_varint(data, pos)
    except ValueError:
        raise TableError("a varint runs past its block") from None


def _block(data: memoryview, handle: bytes | memoryview) -> memoryview:
    offset, pos = read_varint(memoryview(handle), 0)
    size, _ = read_varint(memoryview(handle), pos)
    if offset + size + TRAILER_BYTES > len(data):
        raise TableError(f"a block handle ({offset}, {size}) points past the table's {len(data)} bytes")
    if data[offset + size] != NO_COMPRESSION:
        raise TableError(f"the block at {offset} is compressed (type {data[offset + size]}); TensorFlow writes "
                         "bundles uncompressed, this reader reads no other")
    return data[offset:offset + size]


def _entries(block: memoryview) -> Iterator[tuple[bytes, memoryview]]:
    if len(block) < 4:
        raise TableError("a block is shorter than its restart count")
    restarts, = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 - 4 * restarts
    if end < 0:
        raise TableError(f"a block of {len(block)} bytes claims {restarts} restart points")
    key, pos = b"", 0
    while pos < end:
        shared, pos = read_varint(block, pos)
        non_shared, pos = read_varint(block, pos)
        value_length, pos = read_varint(block, pos)
        if shared > len(key) or pos + non_shared + value_length > end:
            raise TableError("a block entry runs past its block")
        key = key[:shared] + bytes(block[pos:pos + non_shared])
        pos += non_shared
        yield key, block[pos:pos + value_length]
        pos += value_length


def read_table(data: bytes | memoryview) -> Iterator[tuple[bytes, memoryview]]:
    """Every (key, value) of the table, in key order; values are views of `data`."""
    data = memoryview(data)
    if len(data) < FOOTER_BYTES or struct.unpack_from("<Q", data, len(data) - 8)[0] != MAGIC:
        raise TableError("no SSTable footer (magic number) at the end")
    footer = data[len(data) - FOOTER_BYTES:]
    _, pos = read_varint(footer, 0)  # the metaindex block, which a bundle leaves empty
    _, pos = read_varint(footer, pos)
    for _, handle in _entries(_block(data, footer[pos:])):
        yield from _entries(_block(data, handle))
