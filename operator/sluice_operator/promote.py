"""Sending a hot standby its promotion (``sluice_api.promotion``).

Why it exists: the operator decides when the running driver is gone; the standby, which
has no access to the API server, learns it from one HTTP request on its control port.
Sent with the same distrust as the metrics are read (a tenant's image answers): one
deadline for the whole exchange, nothing of the answer read beyond its status, on the
driver exchange threads, never a reconcile's (``scrapes``). A request that fails is
sent again at the next reconcile while the promoted pod still reports itself a
standby (``decide``), so a lost one costs a few seconds, never the pipeline. Not
sooner than :data:`RESEND_SECONDS` after the last (:class:`Promotions`): the reconcile
that follows the promotion's own status write comes milliseconds later, while the
standby is still closing its control port after taking the first. One it took is
never sent again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Final

from sluice_api import promotion
from sluice_operator import scrapeget, scrapes

LOG = logging.getLogger(__name__)
TIMEOUT_SECONDS: Final = 2.0
"""For the whole exchange: connecting, sending, reading the status line."""
RESEND_SECONDS: Final = 0.5
"""The least time between two sends of one promotion; below ``decide``'s requeue of a
promotion not taken yet (1 s), so that requeue always sends."""
FORGET_SECONDS: Final = 60.0


def send(host: str, port: int, epoch: int, timeout: float = TIMEOUT_SECONDS) -> bool:
    """POST the promotion of ``epoch`` to the standby at ``host:port``; whether it
    took it (200)."""
    return exchange(host, port, epoch, timeout).status == HTTPStatus.OK


def exchange(host: str, port: int, epoch: int, timeout: float = TIMEOUT_SECONDS) -> scrapeget.Reply:
    """POST the promotion: the standby's status code, unless it did not answer within
    ``timeout`` seconds (``scrapeget``: one deadline for the whole exchange)."""
    reply = scrapeget.post(host, port, promotion.PATH, promotion.body(epoch), timeout)
    status = reply.status
    if status is None:
        LOG.warning(
            "standby at %s:%d not reached with the promotion of epoch %d", host, port, epoch
        )
    elif status != HTTPStatus.OK:
        LOG.warning(
            "standby at %s:%d refused the promotion of epoch %d: %d", host, port, epoch, status
        )
    return reply


@dataclass
class Promotions:
    """Sends promotions (:func:`exchange`) on the driver exchange threads
    (``scrapes.Exchanges``: a reconcile never waits on a standby), each at most once
    per :data:`RESEND_SECONDS` and never again once taken. Without the limit every
    failover sent two: the reconcile that follows the promotion's own status write
    still read the standby's ``/metrics`` saying standby, sent it again, and reached
    the port just as the standby closed it after taking the first, so the operator
    warned "not reached" about a promotion that had worked."""

    exchanges: scrapes.Exchanges = field(default_factory=lambda: scrapes.EXCHANGES)
    clock: Callable[[], float] = time.monotonic
    _sent: dict[tuple[str, int, int], float] = field(default_factory=dict)
    _taken: dict[tuple[str, int, int], float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def promote(self, host: str, port: int, epoch: int) -> bool:
        """Send the promotion of ``epoch`` (queued); ``False`` when it is not sent: it
        was sent less than :data:`RESEND_SECONDS` ago, was taken, is on its way, or
        the standby is backed off for stalling exchanges."""
        key, now = (host, port, epoch), self.clock()
        with self._lock:
            last = self._sent.get(key)
            if key in self._taken or (last is not None and now - last < RESEND_SECONDS):
                return False
            self._sent = {k: t for k, t in self._sent.items() if now - t < FORGET_SECONDS}
            self._taken = {k: t for k, t in self._taken.items() if now - t < FORGET_SECONDS}
            self._sent[key] = now
        return self.exchanges.submit(
            ("promote", host, str(port), str(epoch)),
            scrapes.endpoint(host, port),
            TIMEOUT_SECONDS,
            lambda: self._send(key),
        )

    def stalled(self, host: str, port: int) -> bool:
        """Whether the standby at ``host:port`` is backed off for stalling exchanges
        (``scrapes.Exchanges``): its promotion is not sent for now."""
        return self.exchanges.suspect(scrapes.endpoint(host, port))

    def taken(self, host: str, port: int, epoch: int) -> bool:
        """Whether the standby at ``host:port`` took the promotion of ``epoch``."""
        with self._lock:
            return (host, port, epoch) in self._taken

    def _send(self, key: tuple[str, int, int]) -> scrapeget.Outcome:
        reply = exchange(*key)
        if reply.status == HTTPStatus.OK:
            with self._lock:
                self._taken[key] = self.clock()
        return reply.outcome


PROMOTIONS: Final = Promotions()
"""The operator's: reconciles of all pipelines send through it."""
