"""Sending a hot standby its promotion (``sluice_api.promotion``).

Why it exists: the operator decides when the running driver is gone; the standby, which
has no access to the API server, learns it from one HTTP request on its control port.
Sent with the same distrust as the metrics are read (a tenant's image answers): one
short deadline, nothing of the answer read beyond its status. A request that fails is
sent again at the next reconcile while the promoted pod still reports itself a
standby (``decide``), so a lost one costs a few seconds, never the pipeline.
"""

from __future__ import annotations

import http.client
import logging
from http import HTTPStatus
from typing import Final

from sluice_api import promotion

LOG = logging.getLogger(__name__)
TIMEOUT_SECONDS: Final = 2.0


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
