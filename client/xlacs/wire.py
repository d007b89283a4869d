"""ExecuteStream's messages written and read around a piece's content, so that its bytes are copied once each way
(docs/data_plane.md): protobuf copies a bytes field in when it is set, twice when the message is serialized, and
twice more when it is parsed and read. A message is its fields in any order, so a piece goes out as the protobuf
encoding of everything else, then its Tensor's content field written here from a view of the array; and comes in as
views of the received bytes, the rest parsed by protobuf. bad_utf8 finds the string that protobuf refuses a message
for without naming it."""
from __future__ import annotations

import collections

from xlacs.v1 import xlacs_pb2

_LEN = 2  # the wire type of bytes, strings and messages
_CONTENT = xlacs_pb2.Tensor.CONTENT_FIELD_NUMBER
_SKIP = {0: None, 1: 8, 2: None, 5: 4}  # wire type -> fixed size (varints and lengths are read)
_MAX_DEPTH = 100  # protobuf's recursion limit: it parses no message nested deeper


def as_is(data: bytes) -> bytes:
    """The serializer of messages written with `encode`."""
    return data


def varint(value: int) -> bytes:
    """`value` as protobuf's base-128 varint."""
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(field: int) -> bytes:
    return varint(field << 3 | _LEN)


def encode(message, field: int, tensor: xlacs_pb2.Tensor, content) -> bytes:
    """`message` (an ExecuteRequest or ExecuteResponse without tensors) with `tensor` (without content) in its
    repeated field `field`, `content` (a bytes-like view) its content: serialized, the content copied once."""
    size = len(content)
    head = tensor.SerializeToString() + _key(_CONTENT) + varint(size)
    return b"".join((message.SerializeToString(), _key(field), varint(len(head) + size), head, content))


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
