"""The TLS material of the stack's data services (Kafka's secure listeners, the
``cassandra-secure`` node): a CA of their own, apart from the Kubernetes control
plane's (see ``servers.kube``), a server certificate for loopback and a client
certificate for mutual TLS.

Integration tests run pipelines against these servers as they would against a
production cluster that demands TLS and credentials, so the files are what such a
cluster hands out: PEM certificates and unencrypted PKCS#8 PEM keys (mode 0600),
which Kafka's PEM key store, Cassandra's ``PEMBasedSslContextFactory``, librdkafka
and Python's ``ssl`` all read. Built with ``pki``, so idempotent in the same way:
existing files that still match are kept and a running server is not disturbed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sluice_dev import pki, ports
from sluice_dev.filelock import locked
from sluice_dev.paths import Layout

DIRECTORY: Final = "tls"
CA_NAME: Final = "sluice-dev-services-ca"
SERVER_SPEC: Final = pki.CertSpec(
    common_name="sluice-dev-services",
    dns_names=("localhost",),
    ip_addresses=(ports.HOST,),
    server=True,
)
CLIENT_SPEC: Final = pki.CertSpec(common_name="sluice-dev-client", client=True)


@dataclass(frozen=True)
class ServiceTls:
    """The PEM files of the services' TLS, as clients and servers use them."""

    ca: Path
    server: pki.KeyPair
    server_bundle: Path
    """The server's key followed by its certificate: the one-file key store that
    Kafka (``ssl.keystore.type=PEM``) and Cassandra (``keystore``) read."""
    client: pki.KeyPair


def directory(layout: Layout) -> Path:
    return layout.conf(DIRECTORY)


def paths(layout: Layout) -> ServiceTls:
    """Where the files are (or will be); see ``ensure`` to make them."""
    where = directory(layout)
    return ServiceTls(
        ca=where / "ca.crt",
        server=pki.KeyPair(where / "server.crt", where / "server.key"),
        server_bundle=where / "server-bundle.pem",
        client=pki.KeyPair(where / "client.crt", where / "client.key"),
    )


def ensure(layout: Layout) -> ServiceTls:
    """Make (or keep) the CA, the server and the client certificate. Kafka and the
    secure Cassandra node call this before every start, possibly from two processes
    at once, hence the lock."""
    where = directory(layout)
    with locked(where):
        ca = pki.ensure_ca(where, "ca", CA_NAME)
        server = pki.ensure_cert(where, "server", ca, SERVER_SPEC)
        pki.ensure_cert(where, "client", ca, CLIENT_SPEC)
        tls = paths(layout)
        bundle = server.key_pem() + server.cert_pem()
        if not tls.server_bundle.exists() or tls.server_bundle.read_bytes() != bundle:
            pki.write_private(tls.server_bundle, bundle)
    return tls


def exports(layout: Layout) -> Mapping[str, str]:
    """The files a client of the secure endpoints needs, for ``sluice-dev env``."""
    files = paths(layout)
    return {
        "SLUICE_TLS_CA_FILE": str(files.ca),
        "SLUICE_TLS_CLIENT_CERT_FILE": str(files.client.cert),
        "SLUICE_TLS_CLIENT_KEY_FILE": str(files.client.key),
    }
