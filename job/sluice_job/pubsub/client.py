"""The driver's side of a Pub/Sub subscription: pull, extend leases, acknowledge.

The official client (``google-cloud-pubsub``), its generated ``Subscriber`` API used
directly: unary ``Pull`` for bounded batches (the streaming pull of the high-level
client hands messages to callbacks as they come, which fits no batch), and
``ModifyAckDeadline``/``Acknowledge`` by ack id. Retries are ours, not the client's:
a call that fails because the server is away raises :class:`PubSubUnavailableError`
at once, and the driver waits out the outage as for Cassandra or Kafka
(``outages``), keeping its epoch and its batch. A subscription that does not exist
or a refused permission raises :class:`PubSubConfigError`, naming the field.

Where it connects (``source.pubsub``): Google's endpoint with a service-account key
(``credentialsSecret``) or Application Default Credentials; an ``endpoint`` without
credentials is an emulator or the local stack's server (plaintext, no credentials,
as ``PUBSUB_EMULATOR_HOST`` would make it); an ``endpoint`` with credentials is a
private endpoint (TLS).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import google.cloud.pubsub_v1 as pubsub_v1
import grpc
from google.api_core import exceptions
from google.api_core.client_options import ClientOptions
from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport
from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

from sluice_api.source import PubSubSource
from sluice_job.pubsub.messages import Message
from sluice_job.sinks.datastore_credentials import ServiceAccount

SCOPES: Final = ("https://www.googleapis.com/auth/pubsub",)
PULL_MAX: Final = 1_000
"""Messages asked for in one Pull (Pub/Sub returns at most 1,000)."""
CALL_SECONDS: Final = 30.0
ACK_CHUNK: Final = 1_000
"""Ack ids per Acknowledge/ModifyAckDeadline request (requests are capped at 512 KB)."""
UNAVAILABLE: Final = (
    exceptions.ServiceUnavailable,
    exceptions.DeadlineExceeded,
    exceptions.InternalServerError,
    exceptions.Aborted,
    exceptions.ResourceExhausted,
    exceptions.Unknown,
    exceptions.Cancelled,
)


class PubSubUnavailableError(Exception):
    """The Pub/Sub server did not answer or said it is unavailable: an outage."""


class PubSubConfigError(Exception):
    """The subscription does not exist or may not be read (exit 2)."""


def subscription_path(project: str, subscription: str) -> str:
    return f"projects/{project}/subscriptions/{subscription}"


def topic_path(project: str, topic: str) -> str:
    return f"projects/{project}/topics/{topic}"


def make_client(kind: Any, source: PubSubSource, key: ServiceAccount | None) -> Any:
    """A ``SubscriberClient`` or ``PublisherClient`` (``kind``) for ``source``'s server."""
    if source.endpoint and key is None:
        channel = grpc.insecure_channel(source.endpoint)
        subscriber = kind is pubsub_v1.SubscriberClient
        transport = SubscriberGrpcTransport if subscriber else PublisherGrpcTransport
        return kind(transport=transport(channel=channel))
    options = ClientOptions(api_endpoint=source.endpoint) if source.endpoint else None
    credentials = key.google(SCOPES) if key is not None else None
    return kind(credentials=credentials, client_options=options)


@dataclass
class Subscription:
    """One subscription, through ``client`` (a ``pubsub_v1.SubscriberClient``)."""

    client: Any
    path: str
    where: str
    """Where it is, for messages: ``source.pubsub`` and the server."""

    @classmethod
    def of(cls, source: PubSubSource, key: ServiceAccount | None) -> Subscription:
        client = make_client(pubsub_v1.SubscriberClient, source, key)
        where = (
            f"source.pubsub.subscription {subscription_path(source.project, source.subscription)}"
        )
        server = source.endpoint or "pubsub.googleapis.com"
        return cls(
            client, subscription_path(source.project, source.subscription), f"{where} at {server}"
        )

    def pull(self, max_messages: int) -> list[Message]:
        """Up to ``max_messages`` (at most :data:`PULL_MAX`) deliveries; none when the
        subscription has nothing to deliver now."""
        try:
            response = self._call(
                self.client.pull,
                subscription=self.path,
                max_messages=min(max_messages, PULL_MAX),
            )
        except PubSubUnavailableError as err:
            if isinstance(err.__cause__, exceptions.DeadlineExceeded):
                return []  # a long poll that found nothing
            raise
        return [_message(received) for received in response.received_messages]

    def extend(self, ack_ids: Sequence[str], seconds: int) -> None:
        """Set the leases of ``ack_ids`` to end ``seconds`` from now (0: give back)."""
        for chunk in _chunks(ack_ids):
            self._call(
                self.client.modify_ack_deadline,
                subscription=self.path,
                ack_ids=list(chunk),
                ack_deadline_seconds=seconds,
            )

    def ack(self, ack_ids: Sequence[str]) -> None:
        for chunk in _chunks(ack_ids):
            self._call(self.client.acknowledge, subscription=self.path, ack_ids=list(chunk))

    def check(self) -> None:
        """Raise :class:`PubSubConfigError` if the subscription cannot be read."""
        self._call(self.client.get_subscription, subscription=self.path)

    def close(self) -> None:
        self.client.close()

    def _call(self, method: Any, **request: Any) -> Any:
        try:
            return method(request=request, retry=None, timeout=CALL_SECONDS)
        except UNAVAILABLE as err:
            raise PubSubUnavailableError(f"{self.where}: {_status(err)}") from err
        except (exceptions.NotFound, exceptions.PermissionDenied) as err:
            raise PubSubConfigError(f"{self.where}: {_status(err)}") from None
        except exceptions.Unauthenticated as err:
            raise PubSubConfigError(
                f"{self.where}: {_status(err)}; check source.pubsub.credentialsSecret"
            ) from None


def _status(err: exceptions.GoogleAPICallError) -> str:
    code = err.grpc_status_code.name if err.grpc_status_code else type(err).__name__
    return f"{code} {err.message}"


def _chunks(ids: Sequence[str]) -> list[Sequence[str]]:
    return [ids[i : i + ACK_CHUNK] for i in range(0, len(ids), ACK_CHUNK)]


def _message(received: Any) -> Message:
    message = received.message
    stamp = message.publish_time  # proto-plus's DatetimeWithNanoseconds, or None
    published = datetime.fromtimestamp(stamp.timestamp(), UTC) if stamp else None
    attributes: Mapping[str, str] = dict(message.attributes)
    return Message(
        message_id=message.message_id,
        data=bytes(message.data),
        attributes=attributes,
        publish_time=published,
        ordering_key=message.ordering_key,
        ack_id=received.ack_id,
    )
