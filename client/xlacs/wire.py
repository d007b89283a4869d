"""Execute's and ExecuteStream's messages written around their tensors' content, so that the bytes are copied once
on the way out (docs/data_plane.md): protobuf copies a bytes field in when it is set, twice when the message is
serialized, and twice more when it is parsed and read. A message is its fields in any order, so a tensor goes out as
the protobuf encoding of everything else, then its content field written here from a view of the array. The pieces
of an ExecuteStream also come in as views of the received bytes, the rest parsed by protobuf (`decode`). bad_utf8
finds the string that protobuf refuses a message for without naming it."""
from __future__ import annotations

import collections
from typing import Iterable

from xlacs.v1 import xlacs_pb2

_LEN = 2  # the wire type of bytes, strings and messages
_CONTENT = xlacs_pb2.Tensor.CONTENT_FIELD_NUMBER
_SKIP = {0: None, 1: 8, 2: None, 5: 4}  # wire type -> fixed size (varints and lengths are read)
_MAX_DEPTH = 100  # protobuf's recursion limit: it parses no message nested deeper
INLINE_BYTES = 4096
READ_IN_PLACE_BYTES = 1 << 20  # docs/data_plane.md: from here reading in place costs no more


def as_is(data: bytes) -> bytes:
    """The serializer of messages written with `encode`."""
    return data


def varint(value: int) -> bytes:
    """`value` as protobuf's base-128 varint."""
    if value < 0x80:
        return _BYTES[value]
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(field: int) -> bytes:
    return varint(field << 3 | _LEN)


_BYTES = [bytes((value,)) for value in range(0x80)]
_CONTENT_KEY = _key(_CONTENT)


def encode(message, field: int, tensors: Iterable[tuple[xlacs_pb2.Tensor, object]]) -> bytes:
    """`message` (an ExecuteRequest or ExecuteResponse without tensors) with `tensors` in its repeated field `field`,
    serialized: each a Tensor without content and its content, a bytes-like view copied once here, or None for a
    tensor that carries no bytes (a handle, a shared-memory region). A content under INLINE_BYTES is set in its Tensor
    instead: protobuf's copies of a few bytes cost less than framing them in Python."""
    parts = [message.SerializeToString()]
    key = _key(field)
    for tensor, content in tensors:
        if content is not None and len(content) < INLINE_BYTES:
            tensor.content, content = bytes(content), None
        head = tensor.SerializeToString()
        if content is None:
            parts += [key, varint(len(head)), head]
            continue
        size = len(content)
        head += _CONTENT_KEY + varint(size)
        parts += [key, varint(len(head) + size), head, content]
    return b"".join(parts)


def decode(data: bytes, message_type, field: int):
    """The message `data` holds, without its tensors in `field`, and those tensors as (Tensor without content,
    a memoryview of the content in `data`)."""
    view = memoryview(data)
    rest, tensors = [], []
    for number, wire_type, start, value, end in _fields(view, 0, len(view)):
        if number != field or wire_type != _LEN:
            rest.append(view[start:end])
            continue
        head, content = [], view[0:0]
        for inner, inner_type, at, inner_value, inner_end in _fields(view, value, end):
            if inner == _CONTENT and inner_type == _LEN:
                content = view[inner_value:inner_end]
            else:
                head.append(view[at:inner_end])
        tensors.append((xlacs_pb2.Tensor.FromString(b"".join(head)), content))
    return message_type.FromString(b"".join(rest)), tensors


def read(data: bytes, message_type, field: int):
    """An Execute message as xlacs reads it: from READ_IN_PLACE_BYTES up, (the message, its tensors in `field` without
    content, and those contents as views of `data`, in order); below, (the message protobuf parsed, None), since
    walking the fields in Python costs a small message more than the copies it saves."""
    if len(data) < READ_IN_PLACE_BYTES:
        return message_type.FromString(data), None
    message, tensors = decode(data, message_type, field)
    getattr(message, message_type.DESCRIPTOR.fields_by_number[field].name).extend(tensor for tensor, _ in tensors)
    return message, [content for _, content in tensors]


def bad_utf8(data: bytes, descriptor) -> tuple[str, bytes] | None:
    """(the path of a string field of the message in `data`, of type `descriptor`, whose bytes are not UTF-8, such
    as `feeds[0].name`; those bytes), or None; ValueError if the fields of `data` cannot be walked."""
    view = memoryview(data)
    messages = collections.deque([(descriptor, 0, len(view), "", 0)])
    while messages:
        message, start, end, path, depth = messages.popleft()
        seen = collections.Counter()
        for number, wire_type, _, value, stop in _fields(view, start, end):
            field = message.fields_by_number.get(number)
            if field is None or wire_type != _LEN:
                continue
            name = f"{path}{field.name}[{seen[number]}]" if field.is_repeated else path + field.name
            seen[number] += 1
            if field.type == field.TYPE_STRING:
                try:
                    str(view[value:stop], "utf-8")
                except UnicodeDecodeError:
                    return name, bytes(view[value:stop])
            elif field.type == field.TYPE_MESSAGE and depth < _MAX_DEPTH:
                messages.append((field.message_type, value, stop, name + ".", depth + 1))
    return None


def _fields(view: memoryview, start: int, end: int):
    """(number, wire type, where the field starts, where its value starts, where it ends) of each field."""
    at = start
    while at < end:
        key, value = read_varint(view, at)
        number, wire_type = key >> 3, key & 7
        if wire_type not in _SKIP:
            raise ValueError(f"field {number} has wire type {wire_type}, which xlacs' messages do not use")
        if wire_type == 0:
            _, stop = read_varint(view, value)
        elif wire_type == _LEN:
            size, value = read_varint(view, value)
            stop = value + size
        else:
            stop = value + _SKIP[wire_type]
        if stop > end:
            raise ValueError(f"field {number} runs past the end of its message")
        yield number, wire_type, at, value, stop
        at = stop


def read_varint(view: memoryview, at: int) -> tuple[int, int]:
    """(the varint at `at`, where it ends): protobuf's and LevelDB's base-128 integers."""
    value = shift = 0
    while True:
        if at >= len(view) or shift > 63:
            raise ValueError("a varint runs past the end of its message")
        byte = view[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if byte < 0x80:
            return value, at
