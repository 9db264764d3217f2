"""Pulled Pub/Sub messages and the pure decisions about them: what goes into the
next batch, and which deliveries are repeats.

Pub/Sub has no offsets: a subscription hands out *leases* on messages, each with an
ack id, and delivers a message again when its lease runs out, after a crash, or
simply twice. The driver turns a stream of deliveries into batches with ids, like
Kafka's: every message of a batch gets a *sequence number* (the subscription's
running count of messages taken into batches), so a batch is the range
``[start, end)`` of sequence numbers and the checkpoint store records it exactly as
it records a Kafka partition's range. A message's sequence number is its source
position in the frame the transform sees (the ``offset`` column), so outputs that
keep the last record per key order a batch's records as for Kafka.

Everything here is computational; the client (``client``), the leases (``leases``)
and the record of batches and committed ids (``spool``) do the I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

ATTRIBUTE_OVERHEAD: Final = 0
"""Pub/Sub counts a message's size as its data plus its attributes' keys and values."""


@dataclass(frozen=True)
class Message:
    """One delivery of one message: what was published, and the lease it came with."""

    message_id: str
    data: bytes
    attributes: Mapping[str, str] = field(default_factory=dict)
    publish_time: datetime | None = None
    ordering_key: str = ""
    ack_id: str = ""
    """The lease of this delivery; empty for a message read back from the spool."""

    @property
    def size(self) -> int:
        """Bytes as Pub/Sub counts them: data plus attribute keys and values."""
        attrs = sum(len(k.encode()) + len(v.encode()) for k, v in self.attributes.items())
        return len(self.data) + attrs + len(self.ordering_key.encode())


@dataclass(frozen=True)
class Taken:
    """Messages chosen for a batch, and those that wait (leased) for the next one."""

    batch: tuple[Message, ...]
    waiting: tuple[Message, ...]


def take(held: Sequence[Message], max_messages: int, max_bytes: int) -> Taken:
    """The first messages of ``held`` that fit ``max_messages`` and ``max_bytes``, in
    order; the first message always fits, however large, so one message larger than
    the byte cap cannot wedge the pipeline."""
    count, size = 0, 0
    for message in held:
        if count >= max_messages or (count and size + message.size > max_bytes):
            break
        count, size = count + 1, size + message.size
    return Taken(tuple(held[:count]), tuple(held[count:]))


@dataclass(frozen=True)
class Sorted:
    """Deliveries sorted into new messages (one delivery each) and repeats."""

    new: tuple[Message, ...]
    repeats: tuple[Message, ...]
    """Deliveries of messages already committed or already held: acknowledged (once
    the driver has shown it still holds its epoch), never processed again."""


def sort_deliveries(
    deliveries: Iterable[Message], committed: Iterable[str], held: Iterable[str] = ()
) -> Sorted:
    """Split ``deliveries``: a message whose id is in ``committed`` (a committed
    batch's) or ``held`` (already waiting for a batch), or repeated within
    ``deliveries``, is a repeat; the first delivery of any other message is new."""
    known = set(committed) | set(held)
    new: list[Message] = []
    repeats: list[Message] = []
    for message in deliveries:
        if message.message_id in known:
            repeats.append(message)
        else:
            known.add(message.message_id)
            new.append(message)
    return Sorted(tuple(new), tuple(repeats))


def oldest_published(messages: Iterable[Message]) -> datetime | None:
    """When the oldest of ``messages`` was published; ``None`` for none."""
    times = [m.publish_time for m in messages if m.publish_time is not None]
    return min(times) if times else None
