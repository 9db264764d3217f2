"""The certificates and keys of the local Kubernetes control plane.

The API server serves TLS and authenticates every client (admin, controller-manager,
scheduler, node agent) by an X.509 client certificate signed by one local CA; the
certificate's common name is the user name and its organisations are the groups.
Everything here is idempotent: a key or certificate that already exists and still
matches what is asked for (subject, names, issuing CA, not about to expire) is kept,
so ``prepare`` can run before every start without invalidating kubeconfigs, tokens
or a running server. Keys are ECDSA P-256: quick to generate and accepted by every
component, including as the service-account token signing key (ES256).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=3650)
RENEW_BEFORE = dt.timedelta(days=30)


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, as PEM files."""

    cert: Path
    key: Path

    def cert_pem(self) -> bytes:
        return self.cert.read_bytes()

    def key_pem(self) -> bytes:
        return self.key.read_bytes()


@dataclass(frozen=True)
class CertSpec:
    """What a leaf certificate must say: who it names and what it may be used for."""

    common_name: str
    organizations: tuple[str, ...] = ()
    dns_names: tuple[str, ...] = ()
    ip_addresses: tuple[str, ...] = ()
    server: bool = False
    client: bool = False


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` readable by the owner only, atomically (rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    partial.replace(path)


def _write_public(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    partial.replace(path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{path} does not hold an EC private key")
    return key


def ensure_private_key(path: Path) -> ec.EllipticCurvePrivateKey:
    """The EC private key at ``path``, generated on first use."""
    if path.exists():
        return _load_key(path)
    key = ec.generate_private_key(ec.SECP256R1())
    write_private(path, _key_pem(key))
    return key


def ensure_public_key(private: Path, public: Path) -> Path:
    """Write the public half of the key at ``private`` to ``public`` (PEM, SPKI)."""
    pem = (
        ensure_private_key(private)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    if not public.exists() or public.read_bytes() != pem:
        _write_public(public, pem)
    return public


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _fresh(cert: x509.Certificate) -> bool:
    return cert.not_valid_after_utc - RENEW_BEFORE > _now()


def ensure_ca(directory: Path, name: str, common_name: str) -> KeyPair:
    """A self-signed CA as ``<name>.crt``/``<name>.key`` in ``directory``; kept if it
    exists and is not about to expire, since replacing it invalidates every leaf."""
    pair = KeyPair(directory / f"{name}.crt", directory / f"{name}.key")
    if pair.cert.exists() and pair.key.exists():
        cert = x509.load_pem_x509_certificate(pair.cert_pem())
        if _fresh(cert):
            return pair
        pair.key.unlink()
    key = ensure_private_key(pair.key)
    subject = _name(common_name)
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_public(pair.cert, cert.public_bytes(serialization.Encoding.PEM))
    return pair


def _matches(cert: x509.Certificate, spec: CertSpec, ca_cert: x509.Certificate) -> bool:
    if cert.issuer != ca_cert.subject or cert.subject != _name(
        spec.common_name, spec.organizations
    ):
        return False
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):  # not signed by this CA's key
        return False
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = set(sans.get_values_for_type(x509.DNSName))
        ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    except x509.ExtensionNotFound:
        dns, ips = set(), set()
    try:
        usages = set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        usages = set()
    return (
        dns == set(spec.dns_names)
        and ips == set(spec.ip_addresses)
        and usages == set(_usages(spec))
        and _fresh(cert)
    )


def _usages(spec: CertSpec) -> list[x509.ObjectIdentifier]:
    return [
        *([ExtendedKeyUsageOID.SERVER_AUTH] if spec.server else []),
        *([ExtendedKeyUsageOID.CLIENT_AUTH] if spec.client else []),
    ]


def ensure_cert(directory: Path, name: str, ca: KeyPair, spec: CertSpec) -> KeyPair:
    """A leaf certificate ``<name>.crt``/``<name>.key`` in ``directory`` signed by
    ``ca``, (re)issued unless an existing one already matches ``spec``."""
    pair = KeyPair(directory / f"{name}.crt", directory / f"{name}.key")
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem())
    if pair.cert.exists() and pair.key.exists():
        existing = x509.load_pem_x509_certificate(pair.cert_pem())
        if _matches(existing, spec, ca_cert):
            return pair
    key = ensure_private_key(pair.key)
    ca_key = _load_key(ca.key)
    usages = _usages(spec)
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(spec.common_name, spec.organizations))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    alt_names: list[x509.GeneralName] = [x509.DNSName(dns) for dns in spec.dns_names]
    alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in spec.ip_addresses]
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write_public(pair.cert, cert.public_bytes(serialization.Encoding.PEM))
    return pair
