"""Bearer tokens: one interceptor refuses calls without a valid token, health stays open, the token file
rotates without a restart; the client, the CLI and the dashboard use the same tokens."""
import json
import os

import grpc
import httpx
import numpy as np
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tests.security.conftest import add_graph, healthy, running
from xlacs import Client
from xlacs.cli import main as cli
from xlacs.v1 import xlacs_pb2, xlacs_pb2_grpc
from xlacs_server.config import Settings
from xlacs_server.dashboard import create_app
from xlacs_server.dashboard.http import HttpServer
from xlacs_server.daemon import Daemon


@pytest.fixture(scope="module")
def tokens_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("auth") / "tokens"
    path.write_text("# operators\nfirst-token\n\n  second-token  \n")
    return path


@pytest.fixture(scope="module")
def secured(tokens_file):
    with running(auth_tokens_file=str(tokens_file), auth_tokens=("env-token",)) as server:
        yield server


def stats(address: str, metadata=()):
    with grpc.insecure_channel(address) as channel:
        return xlacs_pb2_grpc.CompilerStub(channel).GetStats(xlacs_pb2.GetStatsRequest(), metadata=metadata,
                                                             timeout=30)


@pytest.mark.parametrize("metadata, reason", [
    ((), "missing authorization"),
    ((("authorization", "Bearer wrong-token"),), "not valid"),
    ((("authorization", "first-token"),), "not valid"),  # no scheme
    ((("authorization", "Basic first-token"),), "not valid"),
    ((("authorization", "Bearer "),), "not valid"),
])
def test_calls_without_a_valid_token_are_unauthenticated(secured, metadata, reason):
    with pytest.raises(grpc.RpcError) as e:
        stats(secured.address, metadata)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED and reason in e.value.details()


@pytest.mark.parametrize("token", ["first-token", "second-token", "env-token"])
def test_a_valid_token_from_the_file_or_the_settings_is_let_in(secured, token):
    assert stats(secured.address, (("authorization", f"Bearer {token}"),)).version


def test_compile_and_execute_with_a_token_and_none_without(secured):
    with Client(secured.address, timeout=120, token="first-token") as client:
        got, = client.compile(add_graph(), {"x:0": ("float32", (2, 3))}, ["y:0"])(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(got, np.full((2, 3), 2, np.float32))
    before = secured.service.counters.requests
    with Client(secured.address, timeout=120) as client, pytest.raises(grpc.RpcError) as e:
        client.compile(add_graph(), {"x:0": ("float32", (2, 3))}, ["y:0"])
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert secured.service.counters.requests == before  # refused before any handler ran


def test_health_stays_open_and_reflection_needs_a_token(secured):
    assert healthy(secured.address)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    with grpc.insecure_channel(secured.address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        with pytest.raises(grpc.RpcError) as e:
            list(stub.ServerReflectionInfo(iter([request]), timeout=30))
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        replies = list(stub.ServerReflectionInfo(iter([request]), timeout=30,
                                                 metadata=(("authorization", "Bearer env-token"),)))
    assert "xlacs.v1.Compiler" in {s.name for s in replies[0].list_services_response.service}


def test_the_token_file_rotates_without_a_restart(tmp_path):
    path = tmp_path / "tokens"
    path.write_text("old-token\n")
    with running(auth_tokens_file=str(path)) as server:
        assert stats(server.address, (("authorization", "Bearer old-token"),))
        rotated = tmp_path / "tokens.new"
        rotated.write_text("new-token\n")
        os.replace(rotated, path)  # the way to rotate: a new file renamed over the old one
        assert stats(server.address, (("authorization", "Bearer new-token"),))
        with pytest.raises(grpc.RpcError) as e:
            stats(server.address, (("authorization", "Bearer old-token"),))
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        path.unlink()  # a vanished file keeps the tokens read last, rather than locking everyone out
        assert stats(server.address, (("authorization", "Bearer new-token"),))


def test_tokens_come_from_the_environment():
    settings = Settings.from_env({"XLACS_AUTH_TOKENS": "a, b,,c", "XLACS_AUTH_TOKENS_FILE": "/etc/xlacs/tokens"})
    assert settings.auth_tokens == ("a", "b", "c") and settings.auth_tokens_file == "/etc/xlacs/tokens"


def test_cli_sends_the_token_from_a_flag_or_the_environment(secured, monkeypatch, capsys):
    monkeypatch.delenv("XLACS_TOKEN", raising=False)
    assert cli(["ops", "--server", secured.address, "--json", "--token", "second-token"]) == 0
    assert json.loads(capsys.readouterr().out)["ops"]
    assert cli(["ops", "--server", secured.address, "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "UNAUTHENTICATED"
    monkeypatch.setenv("XLACS_TOKEN", "env-token")
    assert cli(["ops", "--server", secured.address, "--json"]) == 0


@pytest.fixture(scope="module")
def dashboard_of(tokens_file):
    """Runs the dashboard of a daemon with authentication on, bound to `host` in its settings (the HTTP
    server listens on loopback in either case)."""
    started = []

    def start(host: str) -> str:
        service = Daemon(Settings.from_env(host=host, auth_tokens_file=str(tokens_file),
                                                       auth_tokens=("env-token",)))
        http = HttpServer(create_app(service), "127.0.0.1", 0)
        http.start()
        started.append(http)
        return f"http://127.0.0.1:{http.port}"
    yield start
    for http in started:
        http.stop()


def test_dashboard_needs_the_token(dashboard_of):
    url = dashboard_of("0.0.0.0")
    with httpx.Client(base_url=url, timeout=60) as http:
        for path in ("/", "/api/overview", "/metrics"):
            refused = http.get(path)
            assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Basic")
        assert http.get("/api/overview", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert http.get("/api/overview", headers={"Authorization": "Bearer first-token"}).status_code == 200
        assert http.get("/", auth=("anyone", "env-token")).status_code == 200  # a browser's Basic prompt
        assert http.get("/metrics", headers={"Authorization": "Bearer second-token"}).status_code == 200
        assert http.get("/healthz").status_code == 200 and http.get("/readyz").status_code == 200


def test_dashboard_on_localhost_needs_the_token_too(dashboard_of):
    """Other users of the host reach loopback too: HLO downloads and all need the token there as well."""
    with httpx.Client(base_url=dashboard_of("127.0.0.1"), timeout=60) as http:
        assert http.get("/api/overview").status_code == 401
        assert http.get("/api/overview", headers={"Authorization": "Bearer first-token"}).status_code == 200


def test_two_authorization_headers_are_refused_even_when_one_is_right(secured, dashboard_of):
    both = (("authorization", "Bearer wrong-token"), ("authorization", "Bearer first-token"))
    with pytest.raises(grpc.RpcError) as e:
        stats(secured.address, both)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED and "2 authorization headers" in e.value.details()
    with httpx.Client(base_url=dashboard_of("0.0.0.0"), timeout=60) as http:
        response = http.get("/api/overview", headers=[("Authorization", "Bearer wrong"),
                                                      ("Authorization", "Bearer first-token")])
        assert response.status_code == 401
