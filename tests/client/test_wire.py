"""xlacs.wire against protobuf itself: what it writes parses as the message protobuf would have written, and
what protobuf writes it reads back, the content as a view of the received bytes."""
import numpy as np
import pytest

from xlacs import wire
from xlacs.v1 import xlacs_pb2

INPUTS, OUTPUTS = xlacs_pb2.ExecuteRequest.INPUTS_FIELD_NUMBER, xlacs_pb2.ExecuteResponse.OUTPUTS_FIELD_NUMBER


def test_a_piece_wire_writes_is_the_message_protobuf_reads():
    array = np.arange(70_000, dtype=np.float32)  # a content length of three varint bytes
    request = xlacs_pb2.ExecuteRequest(executable_id="e1", session_id="s",
                                       outputs=[xlacs_pb2.OutputRequest(name="y:0", keep=True)])
    piece = xlacs_pb2.Tensor(name="x:0", dtype=1, shape=[70_000])
    data = wire.encode(request, INPUTS, [(piece, memoryview(array).cast("B"))])
    want = xlacs_pb2.ExecuteRequest()
    want.CopyFrom(request)
    want.inputs.add(name="x:0", dtype=1, shape=[70_000], content=array.tobytes())
    assert xlacs_pb2.ExecuteRequest.FromString(data) == want


def test_wire_reads_what_protobuf_writes_the_content_in_place():
    message = xlacs_pb2.ExecuteResponse(execute_ms=1.5, outputs=[
        xlacs_pb2.Tensor(name="a", dtype=1, shape=[2], offset=8, content=b"12345678"),
        xlacs_pb2.Tensor(name="b", handle="h", dtype=3)])
    data = message.SerializeToString()
    rest, pieces = wire.decode(data, xlacs_pb2.ExecuteResponse, OUTPUTS)
    assert rest == xlacs_pb2.ExecuteResponse(execute_ms=1.5)
    assert [(t, bytes(c)) for t, c in pieces] == [
        (xlacs_pb2.Tensor(name="a", dtype=1, shape=[2], offset=8), b"12345678"),
        (xlacs_pb2.Tensor(name="b", handle="h", dtype=3), b"")]
    assert pieces[0][1].obj is data  # a view, not a copy


@pytest.mark.parametrize("cut", [1, 3, 9])
def test_a_truncated_message_is_refused(cut):
    data = xlacs_pb2.ExecuteResponse(outputs=[xlacs_pb2.Tensor(name="a", content=b"x" * 200)]).SerializeToString()
    with pytest.raises(ValueError, match="past the end"):
        wire.decode(data[:-cut], xlacs_pb2.ExecuteResponse, OUTPUTS)


def test_tensors_with_and_without_bytes_are_the_message_protobuf_reads():
    big = np.arange(wire.INLINE_BYTES, dtype=np.uint8)  # framed here
    small = np.arange(3, dtype=np.float32)  # set in its Tensor, as protobuf would
    handle = xlacs_pb2.Tensor(name="h:0", handle="resident-1")
    data = wire.encode(xlacs_pb2.ExecuteResponse(execute_ms=2.5), OUTPUTS, [
        (xlacs_pb2.Tensor(name="big:0", dtype=4, shape=[big.size]), big), (handle, None),
        (xlacs_pb2.Tensor(name="small:0", dtype=1, shape=[3]), memoryview(small).cast("B"))])
    assert xlacs_pb2.ExecuteResponse.FromString(data) == xlacs_pb2.ExecuteResponse(execute_ms=2.5, outputs=[
        xlacs_pb2.Tensor(name="big:0", dtype=4, shape=[big.size], content=big.tobytes()),
        xlacs_pb2.Tensor(name="h:0", handle="resident-1"),
        xlacs_pb2.Tensor(name="small:0", dtype=1, shape=[3], content=small.tobytes())])


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 1 << 21, (1 << 63) - 1])
def test_varints_read_back(value):
    data = wire.varint(value)
    assert wire.read_varint(memoryview(data), 0) == (value, len(data))
