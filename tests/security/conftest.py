"""Daemons with security settings on loopback, certificates made for the session (no key is committed), and
small GraphDefs to attack them with."""
import contextlib
import dataclasses
import datetime
import ipaddress

import grpc
import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.conftest import RunningServer
from tests.graphs import GraphBuilder
from xlacs_server.config import Settings


@contextlib.contextmanager
def running(**settings):
    """A daemon on a free loopback port with these settings (over the environment's and the defaults)."""
    server = RunningServer(Settings.from_env(**settings))
    try:
        yield server
    finally:
        server.stop()


def healthy(address: str, credentials: grpc.ChannelCredentials | None = None) -> bool:
    """Whether the daemon's health service answers SERVING, with no token."""
    with (grpc.secure_channel(address, credentials) if credentials else grpc.insecure_channel(address)) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=30)
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def add_graph(shape=(2, 3)) -> bytes:
    """y = x + 1 for a float32 placeholder x."""
    b = GraphBuilder()
    b.placeholder("x", shape=shape)
    b.const("one", np.float32(1).reshape(()))
    b.op("y", "AddV2", "x", "one")
    return b.bytes()


# --- Certificates ----------------------------------------------------------------------------------

@dataclasses.dataclass
class Identity:
    cert: bytes  # PEM
    key: bytes  # PEM

    def write(self, directory, name: str) -> tuple[str, str]:
        cert, key = directory / f"{name}.crt", directory / f"{name}.key"
        cert.write_bytes(self.cert)
        key.write_bytes(self.key)
        return str(cert), str(key)


def _identity(subject: str, issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None, *,
              ca: bool = False, server: bool = False) -> tuple[Identity, x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_cert, issuer_key = issuer or (None, key)
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(name)
               .issuer_name(issuer_cert.subject if issuer_cert else name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    cert = builder.sign(issuer_key, hashes.SHA256())
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return Identity(cert.public_bytes(serialization.Encoding.PEM), pem_key), cert, key


@dataclasses.dataclass
class Pki:
    ca: str  # the CA's certificate file
    server: tuple[str, str]  # (cert, key) files for 127.0.0.1 / localhost
    client: tuple[str, str]  # signed by the CA
    stranger: tuple[str, str]  # a client certificate from another CA
    stranger_ca: str


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca, ca_cert, ca_key = _identity("xlacs test CA", None, ca=True)
    other_ca, other_cert, other_key = _identity("another CA", None, ca=True)
    ca_file, _ = ca.write(directory, "ca")
    other_file, _ = other_ca.write(directory, "other-ca")
    return Pki(ca_file,
               _identity("xlacs server", (ca_cert, ca_key), server=True)[0].write(directory, "server"),
               _identity("xlacs client", (ca_cert, ca_key))[0].write(directory, "client"),
               _identity("stranger", (other_cert, other_key))[0].write(directory, "stranger"),
               other_file)
