"""Publish → pull → ack throughput on the stack's Pub/Sub server, through the
official client: ``python -m sluice_dev.pubsub.throughput --count 10000``.

Two ways to pull, each from a subscription of its own in a project of its own
(forgotten afterwards): unary ``Pull`` of up to ``--batch`` messages acknowledged
per batch (the shape of a micro-batch source), and a streaming pull (``subscribe``)
acknowledging each message in its callback. A run ends when the server has counted
every ack. pstest's streaming pull hands a stream one message per 10 ms delivery
tick, so it tops out near 100 messages/s per stream whatever the machine.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sluice_dev.events import EventFactory
from sluice_dev.pubsub import publish, remote
from sluice_dev.servers import pubsub


@dataclass(frozen=True)
class Measured:
    what: str
    count: int
    seconds: float

    def line(self) -> str:
        """A purely computational rendering: count, time and rate."""
        rate = self.count / self.seconds if self.seconds > 0 else float("inf")
        return f"{self.what:<34} {self.count:>7,} messages in {self.seconds:6.2f}s: {rate:8,.0f}/s"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sluice_dev.pubsub.throughput")
    parser.add_argument("--count", type=int, default=10_000, help="messages per run")
    parser.add_argument("--batch", type=int, default=1_000, help="max messages per unary pull")
    parser.add_argument("--host", default=pubsub.HOST, help="the server (default: the stack's)")
    parser.add_argument("--no-streaming", action="store_true", help="skip the streaming pull")
    args = parser.parse_args(argv)
    project = f"throughput-{uuid.uuid4().hex[:6]}"
    try:
        for measured in run(args.host, project, args.count, args.batch, not args.no_streaming):
            print(measured.line(), flush=True)
    finally:
        remote.forget(project)
    return 0


def run(host: str, project: str, count: int, batch: int, streaming: bool) -> list[Measured]:
    results = []
    for mode in ("pull", "streaming") if streaming else ("pull",):
        topic, subscription = f"t-{mode}", f"s-{mode}"
        publish.ensure_topic(host, project, topic)
        publish.ensure_subscription(host, project, topic, subscription)
        began = time.monotonic()
        publish.publish(host, project, topic, count, factory=EventFactory())
        results.append(Measured("publish", count, time.monotonic() - began))
        path = publish.subscription_path(project, subscription)
        subscriber = publish.subscriber_client(host)
        began = time.monotonic()
        try:
            if mode == "pull":
                _pull(subscriber, path, count, batch)
            else:
                _stream(subscriber, path, count)
            _acked(project, subscription, count)
        finally:
            subscriber.close()
        what = f"unary pull ({batch}) + ack" if mode == "pull" else "streaming pull + ack"
        results.append(Measured(what, count, time.monotonic() - began))
    return results


def _pull(subscriber: Any, path: str, count: int, batch: int) -> None:
    received: set[str] = set()
    while len(received) < count:
        response = subscriber.pull(subscription=path, max_messages=batch, timeout=60)
        messages = response.received_messages
        received.update(m.message.message_id for m in messages)
        if messages:
            subscriber.acknowledge(subscription=path, ack_ids=[m.ack_id for m in messages])


def _stream(subscriber: Any, path: str, count: int, timeout: float = 1_800) -> None:
    received: set[str] = set()
    lock, done = threading.Lock(), threading.Event()

    def callback(message: Any) -> None:
        message.ack()
        with lock:
            received.add(message.message_id)
            if len(received) >= count:
                done.set()

    future = subscriber.subscribe(path, callback)
    try:
        if not done.wait(timeout):
            raise TimeoutError(f"streamed {len(received)} of {count} in {timeout:.0f}s")
    finally:
        future.cancel()


def _acked(project: str, subscription: str, count: int, timeout: float = 120) -> None:
    """Until the server has counted ``count`` acks (the client sends them in batches)."""
    deadline = time.monotonic() + timeout
    while remote.subscription_stats(project, subscription)["acked"] < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the server counted fewer than {count} acks in {timeout:.0f}s")
        time.sleep(0.05)


if __name__ == "__main__":
    raise SystemExit(main())
