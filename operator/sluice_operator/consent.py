"""Secrets by consent: a pipeline may use a Secret only if the platform labelled it so.

A tenant who may create a StreamingPipeline in a namespace must not gain every
Secret of that namespace through it: a manifest names Secrets for credentials,
options, env, files and image pulls, and the driver would hand their contents to the
user's code or send them to whatever hosts the manifest names. The platform marks
the Secrets pipelines may use with one label (the chart's ``secretConsent.label``,
``sluice.dev/usable=true`` by default); before a driver pod is created the operator
reads the labels (metadata only, never a Secret's data) of every Secret the spec
names, and a Secret without the label, or missing, keeps the pod from being created:
the pipeline gets the ``SecretsUsable`` condition naming the Secret and the label,
and starts by itself once the Secret is labelled. An ``optional`` reference is held
to the same rule: a Secret created later would be mounted without anyone having
consented to it, so a missing one keeps the pod from being created too.

A service-account token is never usable, labelled or not: a tenant can create a
Secret of type ``kubernetes.io/service-account-token`` naming any ServiceAccount of
its namespace (the operator's own, in the default install) and the token controller
fills it in. The type is read without the data (the API server's Table form of the
Secret, whose object is its metadata only), and a Secret carrying the annotation
``kubernetes.io/service-account.name`` is refused whatever its type. The platform
may name further types (``--refused-secret-types``).

Consent says which Secrets pipelines may use, not where their values go. A Secret
whose value the operator's connections send (a Kafka SASL or Cassandra login, the
Datastore key) may also carry the annotation ``sluice.dev/allowed-endpoints``, a
comma-separated list of ``host`` or ``host:port`` (``*.example.com`` for every name
under example.com, ``[2001:db8::1]:9042`` for an IPv6 address): every endpoint the
spec sends it to must match, else the same condition names the Secret, the field,
the endpoint and the annotation. The platform chooses whether such a Secret without
the annotation may go anywhere (the default) or is refused
(``--require-secret-endpoints``). TLS material is held to the annotation when it
carries one, never required to: a CA is public, and a client key only signs the
handshake, it is never sent. A Secret carrying the annotation is refused where the
spec hands it to the pipeline's own code (``transform.optionsFrom``, ``spark.pod``'s
env, envFrom and volumes): that code could send it anywhere.

:func:`references`, :func:`refusals`, :func:`deliveries` and
:func:`endpoint_refusals` are pure; ``kube.Kube.secret_metadata`` reads.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from sluice_api import secret_refs
from sluice_api.security import KafkaSecurity, Tls
from sluice_api.spec import PipelineSpec

CONDITION: Final = "SecretsUsable"


@dataclass(frozen=True)
class Label:
    """The label that marks a Secret usable by pipelines."""

    key: str
    value: str

    @classmethod
    def parse(cls, text: str) -> Label | None:
        """``key=value`` (or ``key``, any value); empty: no consent is asked."""
        if not text.strip():
            return None
        key, _, value = text.strip().partition("=")
        if not key:
            raise ValueError(f"secret consent label {text!r}: expected key=value")
        return cls(key, value)

    def on(self, labels: Mapping[str, str]) -> bool:
        return self.key in labels and (not self.value or labels[self.key] == self.value)

    def __str__(self) -> str:
        return f"{self.key}={self.value}" if self.value else self.key


DEFAULT: Final = Label("sluice.dev/usable", "true")
DEFAULT_LABEL: Final = str(DEFAULT)


@dataclass(frozen=True)
class Reference:
    secret: str
    where: str
    """The spec field that names it, as a user writes it."""
    optional: bool = False


def references(spec: PipelineSpec) -> tuple[Reference, ...]:
    """Every Secret the spec names, with the field that names it, in spec order."""
    return tuple(_references(spec))


def _references(spec: PipelineSpec) -> Iterator[Reference]:
    named = dict.fromkeys((use.secret, use.where) for use in secret_refs.uses(spec))
    for secret, where in named:
        yield Reference(secret, where)
    pod = spec.spark.pod
    for i, env in enumerate(pod.env):
        ref = env.value_from.secret_key_ref if env.value_from else None
        if ref is not None:
            yield Reference(ref.name, f"spark.pod.env[{i}].valueFrom", ref.optional)
    for i, source in enumerate(pod.env_from):
        if source.secret_ref is not None:
            yield Reference(
                source.secret_ref.name, f"spark.pod.envFrom[{i}]", source.secret_ref.optional
            )
    for i, volume in enumerate(pod.volumes):
        if volume.secret is not None:
            yield Reference(
                volume.secret.secret_name, f"spark.pod.volumes[{i}].secret", volume.secret.optional
            )
    for i, name in enumerate(pod.image_pull_secrets):
        yield Reference(name, f"spark.pod.imagePullSecrets[{i}]")


def refusals(
    refs: tuple[Reference, ...], labels: Mapping[str, Mapping[str, str] | None], label: Label
) -> tuple[str, ...]:
    """Why each refused Secret may not be used, one line per Secret (a pure function).
    ``labels`` maps each named Secret to its labels, ``None`` if it does not exist
    (refused even where the reference is optional)."""
    said: dict[str, str] = {}
    for ref in refs:
        if ref.secret in said:
            continue
        found = labels.get(ref.secret)
        if found is None:
            optional = " (the reference is optional, but a Secret created later would be used)"
            said[ref.secret] = (
                f"Secret {ref.secret!r} ({ref.where}) does not exist"
                f"{optional if ref.optional else ''}; create it with the label {label}"
            )
        elif not label.on(found):
            said[ref.secret] = (
                f"Secret {ref.secret!r} ({ref.where}) lacks the label {label}: the platform "
                "has not allowed pipelines to use it"
            )
    return tuple(said.values())


# -- what no pipeline may use ------------------------------------------------------

TOKEN_TYPE: Final = "kubernetes.io/service-account-token"
TOKEN_ANNOTATION: Final = "kubernetes.io/service-account.name"
"""The annotation the token controller fills a Secret for (the ServiceAccount named)."""


def token_refusals(
    refs: tuple[Reference, ...],
    found: Mapping[str, SecretMeta | None],
    refused_types: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """Secrets no pipeline may use whatever their labels, each with why (pure):
    service-account tokens (by type or by the annotation that makes the token
    controller fill one in) and the types the platform refuses."""
    said: dict[str, str] = {}
    for ref in refs:
        meta = found.get(ref.secret)
        if meta is None or ref.secret in said:
            continue
        account = meta.annotations.get(TOKEN_ANNOTATION)
        if meta.type == TOKEN_TYPE or account is not None:
            said[ref.secret] = (
                f"Secret {ref.secret!r} ({ref.where}) is a service-account token (of "
                f"{account or 'a ServiceAccount'}): pipelines may never use one, labelled or not"
            )
        elif meta.type in refused_types:
            said[ref.secret] = (
                f"Secret {ref.secret!r} ({ref.where}) is of type {meta.type}, which the "
                "platform refuses to pipelines (--refused-secret-types)"
            )
    return said


# -- where a Secret's value may go ---------------------------------------------------

ENDPOINTS_ANNOTATION: Final = "sluice.dev/allowed-endpoints"
KAFKA_PORT: Final = 9092
CASSANDRA_PORT: Final = 9042
DATASTORE_ENDPOINT: Final = "datastore.googleapis.com:443"
"""Where the Datastore sink sends its key: Google's endpoint (the client's, not the
spec's; with ``DATASTORE_EMULATOR_HOST`` it sends none)."""
PUBSUB_ENDPOINT: Final = "pubsub.googleapis.com:443"
"""Where the Pub/Sub source sends its key when ``source.pubsub.endpoint`` is unset."""
USER_CODE_FIELDS: Final = (
    "transform.optionsFrom",
    "spark.pod.env",
    "spark.pod.envFrom",
    "spark.pod.volumes",
)
"""Fields whose Secrets reach the pipeline's own code, which may send them anywhere."""


@dataclass(frozen=True)
class SecretMeta:
    """What the operator reads of a Secret: its metadata, never its data."""

    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    type: str = "Opaque"


@dataclass(frozen=True)
class Delivery:
    """One Secret used by one connection the spec names, and where it connects."""

    secret: str
    where: str
    """The field that names the Secret."""
    field: str
    """The field that names the endpoints."""
    endpoints: tuple[str, ...]
    """As written in the spec."""
    default_port: int
    sent: bool
    """Its value travels to the endpoints (a login, a key); not TLS material."""


def deliveries(spec: PipelineSpec) -> tuple[Delivery, ...]:
    """Every connection that uses a Secret, with the endpoints it goes to, in spec order."""
    return tuple(_deliveries(spec))


def _deliveries(spec: PipelineSpec) -> Iterator[Delivery]:
    kafka, pubsub = spec.source.kafka, spec.source.pubsub
    brokers = _split(kafka.bootstrap_servers) if kafka is not None else ()
    if kafka is not None:
        where = "source.kafka.security"
        yield from _kafka(kafka.security, where, "source.kafka.bootstrapServers", brokers)
    if pubsub is not None and pubsub.credentials_secret:
        endpoint = pubsub.endpoint or PUBSUB_ENDPOINT
        yield Delivery(
            pubsub.credentials_secret,
            "source.pubsub.credentialsSecret",
            "source.pubsub.endpoint" if pubsub.endpoint else "source.pubsub (Google's endpoint)",
            (endpoint,),
            443,
            sent=True,
        )
    if spec.sink.cassandra is not None:
        sink = spec.sink.cassandra
        yield from _cassandra(
            sink.credentials_secret, sink.tls, "sink.cassandra", tuple(sink.contact_points)
        )
    if spec.sink.datastore is not None and spec.sink.datastore.credentials_secret:
        yield Delivery(
            spec.sink.datastore.credentials_secret,
            "sink.datastore.credentialsSecret",
            "sink.datastore (Google's Datastore endpoint)",
            (DATASTORE_ENDPOINT,),
            443,
            sent=True,
        )
    checkpoint = spec.checkpoint.cassandra
    yield from _cassandra(
        checkpoint.credentials_secret,
        checkpoint.tls,
        "checkpoint.cassandra",
        tuple(checkpoint.contact_points),
    )
    letters = spec.kafka_dead_letter
    if letters is not None and letters.security is not None:
        if letters.bootstrap_servers is None:
            target, field_name = brokers, "source.kafka.bootstrapServers"
        else:
            target = _split(letters.bootstrap_servers)
            field_name = "deadLetter.kafka.bootstrapServers"
        yield from _kafka(letters.security, "deadLetter.kafka.security", field_name, target)


def _split(servers: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in servers.split(",") if part.strip())


def _kafka(
    security: KafkaSecurity, where: str, field_name: str, brokers: tuple[str, ...]
) -> Iterator[Delivery]:
    if security.sasl is not None:
        secret = security.sasl.credentials_secret
        yield Delivery(
            secret, f"{where}.sasl.credentialsSecret", field_name, brokers, KAFKA_PORT, sent=True
        )
    if security.tls is not None:
        yield from _tls(security.tls, f"{where}.tls", field_name, brokers, KAFKA_PORT)


def _cassandra(
    login: str | None, tls: Tls | None, where: str, points: tuple[str, ...]
) -> Iterator[Delivery]:
    field_name = f"{where}.contactPoints"
    if login:
        yield Delivery(
            login, f"{where}.credentialsSecret", field_name, points, CASSANDRA_PORT, sent=True
        )
    if tls is not None:
        yield from _tls(tls, f"{where}.tls", field_name, points, CASSANDRA_PORT)


def _tls(
    tls: Tls, where: str, field_name: str, endpoints: tuple[str, ...], port: int
) -> Iterator[Delivery]:
    for secret, key in ((tls.ca_secret, "caSecret"), (tls.client_secret, "clientSecret")):
        if secret:
            yield Delivery(secret, f"{where}.{key}", field_name, endpoints, port, sent=False)


_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_+.-]*://")
_HOST: Final = re.compile(
    r"^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$"
)


def parse_endpoint(text: str, default_port: int) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]:port`` or a bare IPv6 address (a Kafka
    ``PROTOCOL://`` prefix is dropped) as a normalised host and a port: lower case, no
    trailing dot, an IP address in its canonical form. ``ValueError`` if it is none."""
    host, port = _host_port(_SCHEME.sub("", text.strip()), wildcard=False)
    return host, default_port if port is None else port


@dataclass(frozen=True)
class Allowed:
    """One entry of the annotation: a host (or ``*.domain``, or ``*``) and a port or
    any port."""

    host: str
    port: int | None = None

    def admits(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.host == "*":
            return True
        if self.host.startswith("*."):
            return not _is_ip(host) and host.endswith(self.host[1:])
        return host == self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


def parse_allowed(text: str) -> tuple[Allowed, ...]:
    """The annotation's entries; ``ValueError`` naming the first that is not ``host``,
    ``host:port``, ``*.domain[:port]`` or ``*[:port]`` (an empty value allows nothing)."""
    entries = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        try:
            host, port = _host_port(entry, wildcard=True)
        except ValueError as err:
            raise ValueError(f"{entry!r}: {err}") from None
        entries.append(Allowed(host, port))
    return tuple(entries)


def _host_port(text: str, *, wildcard: bool) -> tuple[str, int | None]:
    if text.startswith("["):
        inner, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError("an IPv6 address is written [address] or [address]:port")
        try:
            host = ipaddress.IPv6Address(inner).compressed
        except ValueError:
            raise ValueError(f"{inner!r} is not an IPv6 address") from None
        return host, _port(rest[1:]) if rest else None
    if text.count(":") > 1:
        try:
            return ipaddress.IPv6Address(text).compressed, None
        except ValueError:
            raise ValueError("write an IPv6 address with a port as [address]:port") from None
    name, colon, port_text = text.partition(":")
    port = _port(port_text) if colon else None
    return _host(name, wildcard=wildcard), port


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"port {text!r} is not a number from 1 to 65535")
    return int(text)


def _host(text: str, *, wildcard: bool) -> str:
    name = text.lower().removesuffix(".")
    if wildcard and name == "*":
        return name
    domain = name[2:] if wildcard and name.startswith("*.") else name
    if _is_ip(domain):
        if domain != name:
            raise ValueError("a wildcard stands for names, not addresses")
        return ipaddress.ip_address(domain).compressed
    if not domain or len(domain) > 253 or not _HOST.match(domain):
        what = "'*', '*.domain' or a host name" if wildcard else "a host name or address"
        raise ValueError(f"{text!r} is not {what}")
    return name


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def endpoint_refusals(
    refs: tuple[Reference, ...],
    sent: tuple[Delivery, ...],
    metadata: Mapping[str, SecretMeta | None],
    *,
    require: bool = False,
) -> tuple[str, ...]:
    """Why a Secret may not go where the spec sends it (a pure function), one line per
    Secret and field: an endpoint its annotation does not allow, an annotation that
    cannot be read, no annotation where the platform requires one (``require``) of
    Secrets whose values are sent, or an annotated Secret handed to the pipeline's own code.
    ``metadata`` maps each named Secret to its metadata, ``None`` if it does not exist
    (``refusals`` says so)."""
    said: list[str] = []
    for ref in refs:
        found = metadata.get(ref.secret)
        if found is None or ENDPOINTS_ANNOTATION not in found.annotations:
            continue
        if ref.where.startswith(USER_CODE_FIELDS):
            said.append(
                f"Secret {ref.secret!r} ({ref.where}) carries the annotation "
                f"{ENDPOINTS_ANNOTATION}, so its value may go only where that lists; "
                f"{ref.where} hands it to the pipeline's own code, which could send it anywhere"
            )
    for use in sent:
        found = metadata.get(use.secret)
        if found is None:
            continue
        line = _delivery_refusal(use, found.annotations.get(ENDPOINTS_ANNOTATION), require)
        if line is not None:
            said.append(line)
    return tuple(dict.fromkeys(said))


def _delivery_refusal(use: Delivery, annotation: str | None, require: bool) -> str | None:
    named = f"Secret {use.secret!r} ({use.where})"
    if annotation is None:
        if not require or not use.sent:
            return None
        return (
            f"{named} has no annotation {ENDPOINTS_ANNOTATION}, which the platform requires "
            f"of Secrets whose values pipelines send: annotate it with where it may go "
            f"(here {', '.join(use.endpoints)}, {use.field})"
        )
    try:
        allowed = parse_allowed(annotation)
    except ValueError as err:
        return (
            f"{named}: its annotation {ENDPOINTS_ANNOTATION} is not a comma-separated list "
            f"of host or host:port: {err}"
        )
    refused = []
    for endpoint in use.endpoints:
        try:
            host, port = parse_endpoint(endpoint, use.default_port)
        except ValueError:
            refused.append(endpoint)
            continue
        if not any(entry.admits(host, port) for entry in allowed):
            refused.append(endpoint)
    if not refused:
        return None
    listed = ", ".join(str(a) for a in allowed) or "nothing"
    return (
        f"{named} may not be sent to {', '.join(refused)} ({use.field}): its annotation "
        f"{ENDPOINTS_ANNOTATION} allows {listed}"
    )
