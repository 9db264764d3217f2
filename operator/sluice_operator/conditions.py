"""The pipeline's conditions, one per type: the time a condition last changed value
is kept while its value stays, and each says which spec (``observedGeneration``) it
is about. ``Ready`` follows the phase."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sluice_api.status import bounded
from sluice_operator.model import Observed, Phase, Status


def set_condition(
    status: Status, kind: str, value: str, reason: str, message: str, obs: Observed
) -> tuple[dict[str, Any], ...]:
    """``status``'s conditions with ``kind`` set; the time it last changed value is
    kept while the value stays, and ``observedGeneration`` says which spec it is about."""
    kept = [dict(c) for c in status.conditions if c.get("type") != kind]
    previous = next((c for c in status.conditions if c.get("type") == kind), None)
    since = (
        previous.get("lastTransitionTime")
        if previous is not None and previous.get("status") == value
        else obs.now.isoformat()
    )
    condition = {
        "type": kind,
        "status": value,
        "reason": reason,
        "message": bounded(message),
        "lastTransitionTime": since,
        "observedGeneration": obs.generation,
    }
    return (*kept, condition)


def says(condition: Mapping[str, Any] | None, message: str) -> bool:
    """Whether ``condition`` already says ``message``, as the status holds it (bounded):
    an unchanged long message is not news."""
    return condition is not None and condition.get("message") == bounded(message)


def with_ready(status: Status, obs: Observed) -> Status:
    ready = "True" if status.phase is Phase.RUNNING else "False"
    return replace(
        status,
        conditions=set_condition(status, "Ready", ready, status.phase.value, status.message, obs),
    )
