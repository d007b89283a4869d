"""An error does not grow with its request: a 1 MB executable id is not echoed back (the client would see
RESOURCE_EXHAUSTED for the size of the status instead of NOT_FOUND)."""
import grpc
import pytest

from xlacs import error_details
from xlacs.v1 import xlacs_pb2
from xlacs_server.errors import ECHO_CHARS


def test_an_unknown_huge_executable_id_is_not_found_with_a_short_message(client):
    huge = "x" * (1 << 20)
    request = xlacs_pb2.ExecuteRequest(executable_id=huge)
    with pytest.raises(grpc.RpcError) as e:
        client.stub.Execute(request, timeout=60)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert len(e.value.details()) < ECHO_CHARS + 200 and "1048576 characters" in e.value.details()
    assert error_details(e.value).reason == "NOT_FOUND"


def test_a_huge_fetch_name_is_cut_in_the_message(client):
    with pytest.raises(grpc.RpcError) as e:
        client.compile(b"", {"x:0": ("float32", [1])}, ["y" * (1 << 20) + ":0"])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert len(e.value.details()) < 5000
