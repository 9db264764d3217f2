"""A second Cassandra 5.0 node that demands what production clusters demand: a
password (``PasswordAuthenticator``, with permissions checked by
``CassandraAuthorizer``) and TLS on the native port, required, not optional.

Integration tests run pipelines against it to show that Sluice's Cassandra code
works with credentials and TLS; everything else uses the open ``cassandra`` node.
It is the same artifact and configuration as that node (see ``servers.cassandra``)
with its own ports, data directory and cluster name, and it is ``optional``: it
starts only when named (``sluice-dev up cassandra-secure``, the ``cassandra_secure``
fixture), not with the default stack.

Certificates come from ``tls``, read by 5.0's ``PEMBasedSslContextFactory``.
Client certificates are not asked for: 5.0's ``require_client_auth`` is a boolean,
and requiring one would keep password-only clients out. The default superuser
``cassandra``/``cassandra`` is created at once (no ``superuser_setup_delay_ms``
wait), so the node is usable as soon as it answers.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable, Mapping
from typing import Any, Final

from sluice_dev import cql, ports, tls
from sluice_dev.paths import Layout
from sluice_dev.servers import cassandra
from sluice_dev.servers.base import Server

NAME: Final = "cassandra-secure"
SUPERUSER: Final = "cassandra"
SUPERUSER_PASSWORD: Final = "cassandra"


def _security(layout: Layout) -> str:
    files = tls.paths(layout)
    return f"""\
# Clients authenticate with a password and need permissions; the native port
# speaks TLS only.
authenticator: PasswordAuthenticator
authorizer: CassandraAuthorizer
role_manager: CassandraRoleManager
network_authorizer: AllowAllNetworkAuthorizer
client_encryption_options:
  enabled: true
  optional: false
  ssl_context_factory:
    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory
  keystore: {files.server_bundle}
  truststore: {files.ca}
  require_client_auth: false
"""


NODE: Final = cassandra.Node(
    name=NAME,
    cluster_name=f"{cassandra.CLUSTER_NAME}-secure",
    native_port=ports.CASSANDRA_SECURE_NATIVE,
    storage_port=ports.CASSANDRA_SECURE_STORAGE,
    security=_security,
    jvm_flags=("-Dcassandra.superuser_setup_delay_ms=0",),
)
CONTACT: Final = NODE.contact


def ssl_context(layout: Layout) -> ssl.SSLContext:
    """A client context that trusts the stack's services CA and checks the host."""
    context = ssl.create_default_context(cafile=str(tls.paths(layout).ca))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def connect_options(layout: Layout, user: str, password: str) -> dict[str, Any]:
    """Keyword arguments of the driver's ``Cluster`` for TLS and a password."""
    from cassandra.auth import PlainTextAuthProvider

    return {
        "ssl_context": ssl_context(layout),
        "ssl_options": {"server_hostname": ports.HOST},
        "auth_provider": PlainTextAuthProvider(username=user, password=password),
    }


def create_role(
    session: Any, name: str, password: str, keyspace: str, permissions: Iterable[str]
) -> None:
    """Create a login role with ``password`` and grant it ``permissions`` (``SELECT``,
    ``MODIFY``, ...) on ``keyspace`` only; ``session`` must be a superuser's."""
    session.execute(cql.create_login_role(name, password))
    for permission in permissions:
        session.execute(cql.grant_on_keyspace(permission, keyspace, name))


def _prepare(layout: Layout) -> None:
    tls.ensure(layout)
    cassandra.prepare(layout, NODE)


def _probe(layout: Layout) -> str | None:
    return cassandra.cql_probe(NODE, **connect_options(layout, SUPERUSER, SUPERUSER_PASSWORD))


def _exports(layout: Layout) -> Mapping[str, str]:
    return {
        "SLUICE_CASSANDRA_SECURE_CONTACT": CONTACT,
        "SLUICE_CASSANDRA_SECURE_USERNAME": SUPERUSER,
        "SLUICE_CASSANDRA_SECURE_PASSWORD": SUPERUSER_PASSWORD,
        **tls.exports(layout),
    }


SERVERS: tuple[Server, ...] = (
    Server(
        name=NAME,
        argv=lambda layout: cassandra.argv(layout, NODE),
        probe=_probe,
        artifacts=(cassandra.ARTIFACT.name,),
        prepare=_prepare,
        exports=_exports,
        start_timeout=180.0,
        stop_grace=30.0,
        optional=True,
    ),
)
