"""The promotion of a hot standby: the one request a standby's control port takes.

Why it exists: a hot standby (``spec.standby: 1``) waits, started and warm, until the
operator decides the running driver is gone (its pod failed or was deleted, or its node
was lost); only the operator knows that, and the driver has no access to the API
server. So the operator tells the standby over HTTP, on a port of its own (the chart's
NetworkPolicy lets only the operator reach it), and the standby then claims the epoch
it was started with, fencing whatever still holds an older one. The request names that
epoch: a standby refuses a promotion meant for another. Both sides import this module,
so they agree on the path and the body.
"""

from __future__ import annotations

import json
from typing import Final

PATH: Final = "/promote"
MAX_BODY: Final = 1024
"""Bytes of a request body a standby reads at most."""


def body(epoch: int) -> bytes:
    """The request body promoting the standby of ``epoch``."""
    return json.dumps({"epoch": epoch}).encode()


def epoch_of(raw: bytes) -> int:
    """The epoch a request body promotes; ``ValueError`` naming what is wrong."""
    try:
        parsed = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"a promotion is a JSON object: {err}") from err
    epoch = parsed.get("epoch") if isinstance(parsed, dict) else None
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 1:
        raise ValueError('a promotion names the standby\'s epoch: {"epoch": <int >= 1>}')
    return epoch
