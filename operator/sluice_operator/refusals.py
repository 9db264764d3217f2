"""What keeps a driver from being created, or from running on, until the platform
allows it: a Secret without its consent (``consent``), an ``envFrom`` key that makes a
reserved variable (``envfrom``), a ServiceAccount the platform has not listed, pod
settings its policy refuses (``podpolicy``). Pure: ``decide`` asks before every new
driver and, for a running one, whenever the Secrets were checked again; here is what
the pipeline then says and does while it waits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sluice_api.spec import PipelineSpec
from sluice_operator import envfrom, podpolicy, steps
from sluice_operator.actions import Action, Decision, Emit, StopPod
from sluice_operator.conditions import says, set_condition, with_ready
from sluice_operator.consent import CONDITION as SECRETS_USABLE
from sluice_operator.lifecycle import Seen
from sluice_operator.model import Observed, PodView, Status
from sluice_operator.settings import Settings

SERVICE_ACCOUNT_ALLOWED = "ServiceAccountAllowed"
"""Condition: the ServiceAccount a spec names is one the platform allows."""


@dataclass(frozen=True)
class Refusal:
    """What keeps a driver pod from being created until the platform allows it."""

    condition: str
    reason: str
    event: str
    message: str


def refusal(obs: Observed, spec: PipelineSpec, settings: Settings) -> Refusal | None:
    """What keeps a driver of ``spec`` from being created now; ``None``: nothing."""
    if obs.secret_refusals or obs.endpoint_refusals:
        message = "; ".join((*obs.secret_refusals, *obs.endpoint_refusals))
        reason = "NotLabelled" if obs.secret_refusals else "EndpointNotAllowed"
        return Refusal(SECRETS_USABLE, reason, "SecretNotUsable", message)
    if obs.env_refusals:
        message = "; ".join(obs.env_refusals)
        return Refusal(envfrom.CONDITION, envfrom.REASON, envfrom.EVENT, message)
    account = spec.spark.pod.service_account_name
    if account and account not in settings.driver_service_accounts:
        listed = ", ".join(sorted(settings.driver_service_accounts)) or "none"
        return Refusal(
            SERVICE_ACCOUNT_ALLOWED,
            "NotListed",
            "ServiceAccountNotAllowed",
            f"ServiceAccount {account!r} (spark.pod.serviceAccountName) is not one the "
            f"platform lets drivers run as (the operator's --driver-service-accounts: {listed})",
        )
    placed = podpolicy.refusals(spec, settings.pod_policy)
    if placed:
        message = "; ".join(placed)
        return Refusal(podpolicy.CONDITION, podpolicy.REASON, podpolicy.EVENT, message)
    return None


def wait_for_consent(
    obs: Observed, status: Status, actions: list[Action], settings: Settings, refused: Refusal
) -> Decision:
    """No driver starts: the pipeline says why (its condition, and an Event when the
    reason is new) and looks again after ``consent_seconds``."""
    message = refused.message
    before = next((c for c in status.conditions if c.get("type") == refused.condition), None)
    if before is None or before.get("status") != "False" or not says(before, message):
        actions.append(Emit("Warning", refused.event, message))
    status = replace(
        status,
        message=f"no driver started: {message}",
        observed_generation=obs.generation,
        conditions=set_condition(status, refused.condition, "False", refused.reason, message, obs),
    )
    return Decision(
        (*actions, *steps.write(obs, with_ready(status, obs))), settings.consent_seconds
    )


def consent_withdrawn(
    obs: Observed, pod: PodView, refused: Refusal, actions: list[Action], settings: Settings
) -> Decision:
    """A Secret the running driver uses may no longer be used (its label removed, its
    allowed endpoints narrowed, its type refused): the driver stops cleanly, its batch
    in flight committed, and the pipeline then waits for consent as one that never
    started does (``wait_for_consent``)."""
    message = refused.message
    status = obs.status
    before = next((c for c in status.conditions if c.get("type") == refused.condition), None)
    if before is None or before.get("status") != "False" or not says(before, message):
        actions.append(Emit("Warning", refused.event, f"stopping {pod.name}: {message}"))
    if not pod.deleting:
        actions.append(StopPod(pod.name))
    status = replace(
        status,
        phase=steps.after(obs, Seen.STOP_ASKED),
        message=f"driver stopping: {message}",
        conditions=set_condition(status, refused.condition, "False", refused.reason, message, obs),
    )
    return Decision(
        (*actions, *steps.write(obs, with_ready(status, obs))), settings.requeue_seconds
    )
