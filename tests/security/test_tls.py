"""gRPC over TLS, and mutual TLS: the client library and the CLI take the credentials; a client without them,
or with a certificate from another CA, gets nowhere."""
import json

import grpc
import numpy as np
import pytest

from tests.security.conftest import add_graph, healthy, running
from xlacs import Client, tls_credentials
from xlacs.cli import main as cli
from xlacs_server.config import Settings
from xlacs_server.rpc.server import server_credentials


@pytest.fixture(scope="module")
def tls_server(pki):
    with running(tls_cert_file=pki.server[0], tls_key_file=pki.server[1]) as server:
        yield server


@pytest.fixture(scope="module")
def mtls_server(pki):
    with running(tls_cert_file=pki.server[0], tls_key_file=pki.server[1], tls_client_ca_file=pki.ca,
                 auth_tokens=("t0k3n",)) as server:
        yield server


def compile_and_run(client: Client) -> np.ndarray:
    return client.compile(add_graph(), {"x:0": ("float32", (2, 3))}, ["y:0"])(np.ones((2, 3), np.float32))[0]


def test_tls_client_compiles_and_executes(tls_server, pki):
    with Client(tls_server.address, timeout=120, credentials=tls_credentials(pki.ca)) as client:
        np.testing.assert_array_equal(compile_and_run(client), np.full((2, 3), 2, np.float32))
    assert healthy(tls_server.address, tls_credentials(pki.ca))


@pytest.mark.parametrize("credentials", ["plaintext", "untrusted CA"])
def test_tls_refuses_plaintext_and_an_untrusted_server_certificate(tls_server, pki, credentials):
    creds = None if credentials == "plaintext" else tls_credentials(pki.stranger_ca)
    with Client(tls_server.address, timeout=30, credentials=creds) as client, pytest.raises(grpc.RpcError) as e:
        client.ops()
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE


def test_mutual_tls_with_a_client_certificate_and_token(mtls_server, pki):
    credentials = tls_credentials(pki.ca, *pki.client)
    with Client(mtls_server.address, timeout=120, credentials=credentials, token="t0k3n") as client:
        np.testing.assert_array_equal(compile_and_run(client), np.full((2, 3), 2, np.float32))
    with Client(mtls_server.address, timeout=30, credentials=credentials) as client, \
            pytest.raises(grpc.RpcError) as e:
        client.ops()
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED  # the certificate alone is not enough


@pytest.mark.parametrize("client_cert", ["none", "from another CA"])
def test_mutual_tls_refuses_clients_without_a_certificate_from_its_ca(mtls_server, pki, client_cert):
    credentials = tls_credentials(pki.ca) if client_cert == "none" else tls_credentials(pki.ca, *pki.stranger)
    with Client(mtls_server.address, timeout=30, credentials=credentials, token="t0k3n") as client, \
            pytest.raises(grpc.RpcError) as e:
        client.ops()
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE


def test_cli_connects_with_tls_flags(mtls_server, pki, capsys):
    flags = ["--server", mtls_server.address, "--json", "--token", "t0k3n", "--tls-ca", pki.ca]
    assert cli(["ops", *flags, "--tls-cert", pki.client[0], "--tls-key", pki.client[1]]) == 0
    assert json.loads(capsys.readouterr().out)["ops"]
    assert cli(["ops", *flags]) == 2  # no client certificate
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "UNAVAILABLE"


@pytest.mark.parametrize("settings, wrong", [
    ({"tls_cert_file": "server.crt"}, "both tls_cert_file and tls_key_file"),
    ({"tls_client_ca_file": "ca.crt"}, "needs tls_cert_file and tls_key_file"),
])
def test_half_a_tls_configuration_is_an_error(settings, wrong):
    with pytest.raises(ValueError, match=wrong):
        server_credentials(Settings(**settings))


def test_tls_settings_come_from_the_environment():
    settings = Settings.from_env({"XLACS_TLS_CERT_FILE": "c", "XLACS_TLS_KEY_FILE": "k",
                                  "XLACS_TLS_CLIENT_CA_FILE": "ca"})
    assert (settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file) == ("c", "k", "ca")
