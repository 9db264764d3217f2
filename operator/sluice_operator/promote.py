"""Sending a hot standby its promotion (``sluice_api.promotion``).

Why it exists: the operator decides when the running driver is gone; the standby, which
has no access to the API server, learns it from one HTTP request on its control port.
Sent with the same distrust as the metrics are read (a tenant's image answers): one
short deadline, nothing of the answer read beyond its status. A request that fails is
sent again at the next reconcile while the promoted pod still reports itself a
standby (``decide``), so a lost one costs a few seconds, never the pipeline. Not
sooner than :data:`RESEND_SECONDS` after the last (:class:`Promotions`): the reconcile
that follows the promotion's own status write comes milliseconds later, while the
standby is still closing its control port after taking the first.
"""

from __future__ import annotations

import http.client
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Final

from sluice_api import promotion

LOG = logging.getLogger(__name__)
TIMEOUT_SECONDS: Final = 2.0
RESEND_SECONDS: Final = 0.5
"""The least time between two sends of one promotion; below ``decide``'s requeue of a
promotion not taken yet (1 s), so that requeue always sends."""
FORGET_SECONDS: Final = 60.0


def send(host: str, port: int, epoch: int, timeout: float = TIMEOUT_SECONDS) -> bool:
    """POST the promotion of ``epoch`` to the standby at ``host:port``; whether it
    took it (200)."""
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request(
            "POST",
            promotion.PATH,
            body=promotion.body(epoch),
            headers={"Content-Type": "application/json"},
        )
        response = connection.getresponse()
        if response.status == HTTPStatus.OK:
            return True
        LOG.warning(
            "standby at %s:%d refused the promotion of epoch %d: %d %s",
            host,
            port,
            epoch,
            response.status,
            response.reason,
        )
        return False
    except (OSError, http.client.HTTPException) as err:
        LOG.warning(
            "standby at %s:%d not reached with the promotion of epoch %d: %s",
            host,
            port,
            epoch,
            err,
        )
        return False
    finally:
        connection.close()


@dataclass
class Promotions:
    """Sends promotions (:func:`send`), each at most once per :data:`RESEND_SECONDS`.
    Without it every failover sent two: the reconcile that follows the promotion's
    status write still read the standby's ``/metrics`` saying standby, sent it again,
    and reached the port just as the standby closed it after taking the first, so the
    operator warned "not reached" about a promotion that had worked."""

    clock: Callable[[], float] = time.monotonic
    _sent: dict[tuple[str, int, int], float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def promote(self, host: str, port: int, epoch: int) -> bool | None:
        """Send the promotion of ``epoch``; ``None`` when it was sent less than
        :data:`RESEND_SECONDS` ago (not sent again), else whether it was taken."""
        key, now = (host, port, epoch), self.clock()
        with self._lock:
            last = self._sent.get(key)
            if last is not None and now - last < RESEND_SECONDS:
                return None
            self._sent = {k: t for k, t in self._sent.items() if now - t < FORGET_SECONDS}
            self._sent[key] = now
        return send(host, port, epoch)


PROMOTIONS: Final = Promotions()
"""The operator's: reconciles of all pipelines send through it."""
