"""The TLS material of the stack's secure endpoints is what their servers and clients
read: a server certificate for 127.0.0.1 and localhost and a client certificate, both
from the services CA (not the Kubernetes one), keys in unencrypted PKCS#8 PEM that
only the owner can read, made once and kept on every later start."""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from sluice_dev import tls
from sluice_dev.paths import Layout

pytestmark = pytest.mark.unit


def _layout(tmp_path: Path) -> Layout:
    return Layout(cache=tmp_path / "cache", stack=tmp_path / "stack")


def test_server_certificate_names_loopback_and_is_signed_by_the_services_ca(
    tmp_path: Path,
) -> None:
    files = tls.ensure(_layout(tmp_path))
    cert = x509.load_pem_x509_certificate(files.server.cert_pem())
    ca = x509.load_pem_x509_certificate(files.ca.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value

    cert.verify_directly_issued_by(ca)
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert ca.subject.rfc4514_string() == f"CN={tls.CA_NAME}"


def test_client_certificate_is_for_client_authentication(tmp_path: Path) -> None:
    files = tls.ensure(_layout(tmp_path))
    cert = x509.load_pem_x509_certificate(files.client.cert_pem())
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_keys_are_unencrypted_pkcs8_readable_by_the_owner_only(tmp_path: Path) -> None:
    files = tls.ensure(_layout(tmp_path))
    for key in (files.server.key, files.client.key, files.server_bundle):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
        assert key.read_text().startswith("-----BEGIN PRIVATE KEY-----\n"), key
    assert files.server_bundle.read_bytes() == files.server.key_pem() + files.server.cert_pem()


def test_python_ssl_loads_the_files_as_a_server_and_a_client_would(tmp_path: Path) -> None:
    files = tls.ensure(_layout(tmp_path))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(files.server_bundle)
    client = ssl.create_default_context(cafile=str(files.ca))
    client.load_cert_chain(files.client.cert, files.client.key)


def test_a_second_ensure_keeps_every_file(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    first = tls.ensure(layout)
    before = {path: path.read_bytes() for path in tls.directory(layout).iterdir()}
    second = tls.ensure(layout)
    assert second == first
    assert {path: path.read_bytes() for path in tls.directory(layout).iterdir()} == before
