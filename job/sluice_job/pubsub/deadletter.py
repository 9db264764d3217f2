"""Dead letters to a Pub/Sub topic (``deadLetter.pubsub``), for a Pub/Sub source.

The same promise as the Kafka writer (``sluice_job.deadletter``): ``write`` returns
only once the server confirmed every letter, else it raises and the batch fails
uncommitted, so a commit (and the acknowledgement after it) never covers a reject
that is not durable. A letter's data is the message's data (cut to fit Pub/Sub's
10 MB limit, saying so), its attributes the message's own plus the ``sluice.*``
headers of a Kafka letter: reason, pipeline, batch, the source subscription and
sequence number, and ``sluice.pubsub.message.id``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import google.cloud.pubsub_v1 as pubsub_v1
from google.api_core import exceptions

from sluice_api.dead_letter import PubSubDeadLetter
from sluice_api.source import PUBSUB_MAX_MESSAGE_BYTES, PubSubSource
from sluice_job.deadletter import DeadLetterError, Reject, fit, headers
from sluice_job.pubsub import client
from sluice_job.pubsub.client import PubSubConfigError, PubSubUnavailableError
from sluice_job.pubsub.records import ATTRIBUTE_HEADER
from sluice_job.sinks.datastore_credentials import ServiceAccount

CONFIRM_SECONDS: Final = 30.0
HEADROOM: Final = 64 * 1024
"""Bytes of a letter kept for its attributes (Pub/Sub allows 100 of up to 1,280
bytes each: 128 KB; a source message's own are cut to 512 bytes in the letter)."""
ATTRIBUTE_VALUE_MAX: Final = 1024
ATTRIBUTE_NAME_MAX: Final = 256


@dataclass
class PubSubDeadLetters:
    publisher: Any
    topic: str
    """``projects/<project>/topics/<id>``."""
    pipeline: str
    refuses: bool = False

    @property
    def payload_budget(self) -> int:
        return PUBSUB_MAX_MESSAGE_BYTES - HEADROOM

    def write(self, rejects: Iterable[Reject], *, batch_id: int, count: int) -> None:
        futures = []
        try:
            for reject in rejects:
                letter = fit(reject, self.payload_budget)
                futures.append(
                    self.publisher.publish(
                        self.topic,
                        letter.value or b"",
                        **attributes(letter, self.pipeline, batch_id),
                    )
                )
            for future in futures:
                future.result(timeout=CONFIRM_SECONDS)
        except client.UNAVAILABLE as err:
            raise PubSubUnavailableError(
                f"dead-letter topic {self.topic}: {err}; the batch is not committed"
            ) from err
        except (exceptions.GoogleAPICallError, TimeoutError) as err:
            raise DeadLetterError(
                f"dead-letter topic {self.topic} (deadLetter.pubsub.topic): {len(futures)} "
                f"rejects of batch {batch_id} not confirmed ({err}); the batch is not committed"
            ) from None


def attributes(reject: Reject, pipeline: str, batch_id: int) -> dict[str, str]:
    """A letter's attributes (a pure function): the source message's own attributes,
    then the ``sluice.*`` headers, each cut to Pub/Sub's limits."""
    result: dict[str, str] = {}
    for name, value in headers(reject, pipeline, batch_id):
        text = value.decode(errors="replace") if isinstance(value, bytes) else str(value or "")
        own = name.removeprefix(ATTRIBUTE_HEADER) if name.startswith(ATTRIBUTE_HEADER) else name
        result[_cut(own, ATTRIBUTE_NAME_MAX)] = _cut(text, ATTRIBUTE_VALUE_MAX)
    if reject.key:
        result["sluice.source.key"] = _cut(reject.key.decode(errors="replace"), ATTRIBUTE_VALUE_MAX)
    return result


def _cut(text: str, limit: int) -> str:
    data = text.encode()
    return text if len(data) <= limit else data[:limit].decode(errors="ignore")


def pubsub(
    target: PubSubDeadLetter, source: PubSubSource, key: ServiceAccount | None, pipeline: str
) -> PubSubDeadLetters:
    """A writer to the topic, after checking that it exists."""
    publisher = client.make_client(pubsub_v1.PublisherClient, source, key)
    topic = client.topic_path(target.project or source.project, target.topic)
    try:
        publisher.get_topic(request={"topic": topic}, retry=None, timeout=CONFIRM_SECONDS)
    except client.UNAVAILABLE as err:
        raise PubSubUnavailableError(f"dead-letter topic {topic}: {err}") from err
    except exceptions.NotFound:
        raise DeadLetterError(
            f"dead-letter topic {topic} does not exist; create it (deadLetter.pubsub.topic)"
        ) from None
    except exceptions.GoogleAPICallError as err:
        raise PubSubConfigError(
            f"dead-letter topic {topic} (deadLetter.pubsub.topic): {err}"
        ) from None
    return PubSubDeadLetters(publisher, topic, pipeline)
