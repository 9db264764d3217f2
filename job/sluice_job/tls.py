"""TLS material of one connection, from the PEM text the operator puts in the driver's
environment (``<PREFIX>_CA``, ``_CERT``, ``_KEY``, from the spec's ``tls`` Secrets).

PEM text rather than files: the Kafka clients take PEM strings directly, so nothing
secret is written anywhere for them; Python's :mod:`ssl` (the Cassandra driver)
reads a client key only from a file, so :meth:`TlsMaterial.ssl_context` writes it
to a private temporary directory, loads it and removes it again. The value is
picklable (Spark sends it to the tasks of the Cassandra sink) and hashable (the
executor side caches sessions by target); the key never appears in its repr.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sluice_api import env as names
from sluice_api.security import Tls


class TlsMaterialError(Exception):
    """A ``tls`` Secret's key is missing from the environment or is not PEM."""


@dataclass(frozen=True)
class TlsMaterial:
    ca_pem: str | None = None
    cert_pem: str | None = None
    key_pem: str | None = field(default=None, repr=False)
    verify_hostname: bool = True

    def __repr__(self) -> str:
        return (
            f"TlsMaterial(ca={'set' if self.ca_pem else 'system'}, "
            f"client={'set' if self.cert_pem else 'none'}, "
            f"verify_hostname={self.verify_hostname})"
        )

    @classmethod
    def from_env(cls, tls: Tls | None, env: Mapping[str, str], prefix: str) -> TlsMaterial | None:
        """The material ``tls`` names, read from ``<prefix>_CA/_CERT/_KEY``; ``None``
        when the connection is not TLS."""
        if tls is None:
            return None
        ca = _pem(env, prefix + names.CA_SUFFIX) if tls.ca_secret else None
        cert = key = None
        if tls.client_secret:
            cert = _pem(env, prefix + names.CERT_SUFFIX)
            key = _pem(env, prefix + names.KEY_SUFFIX)
        return cls(ca, cert, key, tls.verify_hostname)

    def ssl_context(self) -> ssl.SSLContext:
        """A client context: the CA (or the system's), the client certificate if any,
        hostname checks as configured."""
        context = ssl.create_default_context(cadata=self.ca_pem)
        context.check_hostname = self.verify_hostname
        if self.cert_pem and self.key_pem:
            with tempfile.TemporaryDirectory(prefix="sluice-tls-") as private:
                cert = _private_file(Path(private) / "tls.crt", self.cert_pem)
                key = _private_file(Path(private) / "tls.key", self.key_pem)
                context.load_cert_chain(cert, key)
        return context


def _pem(env: Mapping[str, str], variable: str) -> str:
    value = env.get(variable, "")
    if "-----BEGIN " not in value:
        raise TlsMaterialError(
            f"{variable} is {'empty' if not value else 'not PEM'}: check the key in the "
            "Secret the spec's tls field names"
        )
    return value


def _private_file(path: Path, text: str) -> Path:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    return path
