"""A test certificate authority and the emulator's server certificate, made fresh at every start.

Azure's endpoints are HTTPS only, and the SDK refuses to send a bearer token over plain HTTP in its code-upload path
(cluster-platforms.md §6.6), so the emulator serves TLS. Clients trust it through a CA bundle file: ``requests`` (used
by azure-core, MSAL and MLflow) reads ``REQUESTS_CA_BUNDLE``; Python's own ``ssl`` default context (urllib, httpx with
``trust_env``) reads ``SSL_CERT_FILE``. The bundle holds only the test CA, so pointing either variable at it makes the
process trust nothing else; tests set them only around the emulator's use.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class TlsFiles:
    ca_bundle: Path  # the test CA's certificate (PEM): what clients trust
    cert_chain: Path  # the server certificate followed by the CA's
    key: Path  # the server's private key

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_chain, self.key)
        return context


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _validity(builder: x509.CertificateBuilder) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    # a day back covers clock skew between the emulator and a client; the emulator never lives a week
    return builder.not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(
        now + datetime.timedelta(days=7)
    )


def _make_ca() -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name("trialfleet AML emulator test CA"))
        .issuer_name(_name("trialfleet AML emulator test CA"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    return key, _validity(builder).sign(key, hashes.SHA256())


def _make_server(
    ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, dns_names: list[str]
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(name) for name in ["localhost", *dns_names]]
    names += [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address("::1"))]
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    return key, _validity(builder).sign(ca_key, hashes.SHA256())


def make_tls_files(directory: Path, dns_names: list[str]) -> TlsFiles:
    """Write a new CA and a server certificate for loopback plus ``dns_names`` (wildcards allowed) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _make_ca()
    server_key, server_cert = _make_server(ca_key, ca_cert, dns_names)
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    files = TlsFiles(directory / "ca.pem", directory / "server-chain.pem", directory / "server-key.pem")
    files.ca_bundle.write_bytes(ca_pem)
    files.cert_chain.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM) + ca_pem)
    files.key.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    files.key.chmod(0o600)
    return files
