"""Condition ``SpecUnderstood``: whether the operator knows every field of the spec.

Why it exists: an operator older than its CRD acts on the fields it knows and sets the
others aside (``unknown_fields``); whoever set one of those (``spec.standby: 1``, say)
must learn that it has no effect yet, and why. The condition is False naming the
fields, with one Warning Event (``UnknownFields``) when it turns False, and True once
the operator knows them all; a pipeline that never had one carries no condition.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from sluice_operator.actions import Action, Decision, Emit, WriteStatus
from sluice_operator.conditions import says, set_condition
from sluice_operator.model import Observed, Status

CONDITION: Final = "SpecUnderstood"
UNKNOWN: Final = "UnknownFields"


def message(fields: tuple[str, ...]) -> str:
    if not fields:
        return "this operator knows every field of the spec"
    return (
        f"this operator does not know {', '.join(fields)}: the CRD is newer than the "
        "operator; these fields have no effect until the operator is upgraded"
    )


def with_condition(obs: Observed, decision: Decision) -> Decision:
    """``decision`` with the condition set in every status it writes (or one more
    write when it writes none and the condition changes)."""
    previous = next((c for c in obs.status.conditions if c.get("type") == CONDITION), None)
    if previous is None and not obs.unknown_fields:
        return decision
    value = "False" if obs.unknown_fields else "True"
    said = message(obs.unknown_fields)
    reason = UNKNOWN if obs.unknown_fields else "AllFieldsKnown"
    changed = previous is None or previous.get("status") != value or not says(previous, said)

    def condition(status: Status) -> Status:
        return replace(
            status, conditions=set_condition(status, CONDITION, value, reason, said, obs)
        )

    actions: list[Action] = [
        WriteStatus(condition(a.status)) if isinstance(a, WriteStatus) else a
        for a in decision.actions
    ]
    if changed and not any(isinstance(a, WriteStatus) for a in actions):
        actions.append(WriteStatus(condition(obs.status)))
    if changed and obs.unknown_fields:
        actions.append(Emit("Warning", UNKNOWN, said))
    return replace(decision, actions=tuple(actions))
