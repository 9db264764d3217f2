"""The pipeline's conditions, one per type: the time a condition last changed value
is kept while its value stays, and each says which spec (``observedGeneration``) it
is about. ``Ready`` follows the phase."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

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
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": obs.generation,
    }
    return (*kept, condition)


def with_ready(status: Status, obs: Observed) -> Status:
    ready = "True" if status.phase is Phase.RUNNING else "False"
    return replace(
        status,
        conditions=set_condition(status, "Ready", ready, status.phase.value, status.message, obs),
    )
