"""Starting the next driver: its epoch written to the status ahead, then its pod.

The write-ahead rule (``actions``) in one place: every rule of ``decide`` that needs a
new driver comes here, and so does a standby (``handover``) for what its pod shares
with a driver's (the owner, the Secrets its executors may name). Pure.
"""

from __future__ import annotations

from dataclasses import replace

from sluice_api.spec import PipelineSpec
from sluice_operator import builders, changes, envfrom, naming, podpolicy, refusals, rollback
from sluice_operator.actions import (
    Action,
    CreatePod,
    Decision,
    Emit,
    EnsureObjects,
    StopPod,
    WriteStatus,
)
from sluice_operator.conditions import set_condition, with_ready
from sluice_operator.consent import CONDITION as SECRETS_USABLE
from sluice_operator.model import Observed, Phase, StandbyState, Status
from sluice_operator.settings import Settings


def start(
    obs: Observed,
    spec: PipelineSpec,
    status: Status,
    phase: Phase,
    actions: list[Action],
    settings: Settings,
    epoch_floor: int = 0,
) -> Decision:
    """Write the next epoch ahead, then create its pod; unless the spec names a Secret
    the platform has not allowed, then wait for its label without using an epoch."""
    refused = refusals.refusal(obs, spec, settings)
    if refused is not None:
        return refusals.wait_for_consent(obs, status, actions, settings, refused)
    for kind, reason, message in (
        (SECRETS_USABLE, "Labelled", "every Secret may be used"),
        (refusals.SERVICE_ACCOUNT_ALLOWED, "Listed", "the ServiceAccount may be used"),
        (envfrom.CONDITION, "NoReservedName", "no envFrom key makes a reserved variable"),
        (podpolicy.CONDITION, "Allowed", "the platform allows the pods' settings"),
    ):
        if any(c.get("type") == kind for c in status.conditions):
            status = replace(
                status, conditions=set_condition(status, kind, "True", reason, message, obs)
            )
    epoch = max(status.highest_epoch, epoch_floor) + 1
    digest = changes.spec_hash(spec)
    status = new_spec_runs(obs, status)
    if status.standby is not None and status.standby.live:  # a new driver instead of it
        actions = [*actions, StopPod(status.standby.pod)]
        status = replace(
            status,
            standby=replace(
                status.standby, state=StandbyState.CANCELLED, message="a new driver started"
            ),
        )
    owner = owner_of(obs, settings)
    status = replace(
        status,
        executor_secrets=executor_secrets(obs, spec),
        phase=phase,
        epoch=epoch,
        driver_pod=naming.driver_pod(obs.name, epoch),
        image=spec.image,
        spec_hash=digest,
        stop_reason=None,
        next_start_at=None,
        observed_generation=obs.generation,
    )
    status = with_ready(status, obs)
    return Decision(
        (
            *actions,
            WriteStatus(status),
            EnsureObjects(tuple(builders.supporting(owner, spec, settings.driver_cluster_role))),
            CreatePod(builders.driver_pod(owner, spec, epoch, digest)),
            Emit("Normal", "DriverCreated", f"{status.driver_pod} (epoch {epoch}, {spec.image})"),
        ),
        settings.requeue_seconds,
    )


def new_spec_runs(obs: Observed, status: Status) -> Status:
    """A rolled-back upgrade is over once a new spec's driver starts."""
    if status.rolled_back is None or obs.rolling_back:
        return status
    return replace(
        status,
        rolled_back=None,
        conditions=set_condition(
            status, rollback.ROLLED_BACK, "False", "SpecChanged", "the spec changed since", obs
        ),
    )


def executor_secrets(obs: Observed, spec: PipelineSpec) -> tuple[str, ...] | None:
    """``status.executorSecrets`` for a driver of ``spec``: ``None`` without executors."""
    if spec.spark.executors.instances == 0:
        return None
    owner = builders.Owner(obs.name, obs.namespace, obs.uid, "")
    return builders.executor_secrets(owner, spec)


def owner_of(obs: Observed, settings: Settings) -> builders.Owner:
    """The pipeline as the objects the operator makes for it name it, with what the
    platform decided for its drivers."""
    return builders.Owner(
        obs.name,
        obs.namespace,
        obs.uid,
        settings.cluster_id,
        ui_on_network=settings.spark_ui_on_network,
    )
