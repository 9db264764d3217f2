"""What the operator knows about one pipeline, as plain immutable values.

``observe`` fills these from the API; ``decide`` reads them. Keeping the
decision's inputs free of client objects makes every lifecycle rule a pure function
that unit tests exercise with hand-made values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from sluice_api.spec import PipelineSpec
from sluice_api.status import Phase, StandbyPurpose, StandbyState, StopReason, bounded
from sluice_operator.progress import DriverProgress

__all__ = [
    "GoodSpec",
    "LastCommit",
    "NodeView",
    "Observed",
    "Phase",
    "PodPhase",
    "PodView",
    "Rollback",
    "Standby",
    "StandbyPurpose",
    "StandbyState",
    "Status",
    "StopReason",
]


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class PodView:
    """A driver pod as the decision needs it."""

    name: str
    epoch: int
    phase: PodPhase
    node: str | None = None
    deleting: bool = False
    exit_code: int | None = None
    message: str = ""
    """The driver's termination message (JSON) or the container's reason."""
    running_since: datetime | None = None
    finished_at: datetime | None = None
    ip: str | None = None
    created_at: datetime | None = None
    waiting: str = ""
    """Why a pod that does not run waits, as the kubelet or scheduler says it
    (``ImagePullBackOff``, ``CreateContainerConfigError``, ``Unschedulable``)."""
    waiting_message: str = ""
    control: bool = False
    """Started as a standby: its container serves a control port (``builders``), where
    a promotion reaches it."""

    @property
    def terminated(self) -> bool:
        return self.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)


@dataclass(frozen=True)
class NodeView:
    name: str
    ready: bool
    not_ready_since: datetime | None = None


@dataclass(frozen=True)
class LastCommit:
    batch_id: int
    time: str
    epoch: int | None = None
    """The driver's that reported it; ``None`` in a status written before epochs were."""


@dataclass(frozen=True)
class Lag:
    records: int
    time: str
    oldest_age: int | None = None
    """Pub/Sub: seconds since the oldest held message was published."""


@dataclass(frozen=True)
class GoodSpec:
    """The last spec whose driver committed (``status.lastGoodSpec``)."""

    spec_hash: str
    image: str
    spec: str
    """JSON of the driver fields (``changes.driver_view``)."""


@dataclass(frozen=True)
class AppliedReset:
    """The last offset reset in effect (``status.offsetReset``)."""

    id: str
    to: str
    epoch: int
    time: str


@dataclass(frozen=True)
class Rollback:
    """A failed upgrade rolled back (``status.rolledBack``)."""

    image: str
    spec_hash: str
    reason: str
    time: str


@dataclass(frozen=True)
class Standby:
    """The standby driver (``status.standby``): the new spec's of a warm handover, or a
    hot standby of the running spec (``purpose``)."""

    pod: str
    epoch: int
    spec_hash: str
    image: str
    state: StandbyState
    message: str = ""
    purpose: StandbyPurpose = StandbyPurpose.UPGRADE
    failures: int = 0
    """Hot standbys that failed in a row (their restart backoff)."""
    since: str | None = None
    """When it entered ``state`` (RFC 3339)."""

    @property
    def hot(self) -> bool:
        return self.purpose is StandbyPurpose.FAILOVER

    @property
    def live(self) -> bool:
        """Starting or Ready: its pod is the pipeline's, not an older one to clean up."""
        return self.state in (StandbyState.STARTING, StandbyState.READY)


@dataclass(frozen=True)
class Status:
    """``status`` of a StreamingPipeline; the operator's write-ahead log."""

    phase: Phase = Phase.PENDING
    epoch: int = 0
    driver_pod: str | None = None
    image: str | None = None
    spec_hash: str | None = None
    """Hash of the spec the current driver was started with."""
    stop_reason: StopReason | None = None
    failures: int = 0
    """Failed drivers in a row; reset once a driver has run stably."""
    next_start_at: str | None = None
    restarts: int = 0
    observed_generation: int = 0
    last_commit: LastCommit | None = None
    lag: Lag | None = None
    message: str = ""
    conditions: tuple[Mapping[str, Any], ...] = ()
    last_good: GoodSpec | None = None
    rolled_back: Rollback | None = None
    offset_reset: AppliedReset | None = None
    executor_secrets: tuple[str, ...] | None = None
    """The Secrets the current driver's executor pods may name (``builders.executor_secrets``);
    the chart's admission policy reads them here. ``None`` without executors."""
    standby: Standby | None = None

    @property
    def highest_epoch(self) -> int:
        """The highest epoch handed out: the current driver's, or a standby's above it."""
        return max(self.epoch, self.standby.epoch if self.standby else 0)

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> Status:
        raw = raw or {}
        commit, lag = raw.get("lastCommit"), raw.get("lag")
        return cls(
            phase=Phase(raw.get("phase", Phase.PENDING)),
            epoch=int(raw.get("epoch", 0)),
            driver_pod=raw.get("driverPod"),
            image=raw.get("image"),
            spec_hash=raw.get("specHash"),
            stop_reason=StopReason(raw["stopReason"]) if raw.get("stopReason") else None,
            failures=int(raw.get("failures", 0)),
            next_start_at=raw.get("nextStartAt"),
            restarts=int(raw.get("restarts", 0)),
            observed_generation=int(raw.get("observedGeneration", 0)),
            last_commit=(
                LastCommit(
                    int(commit["batchId"]),
                    str(commit["time"]),
                    int(commit["epoch"]) if commit.get("epoch") is not None else None,
                )
                if commit
                else None
            ),
            lag=_lag(lag) if lag else None,
            message=str(raw.get("message", "")),
            conditions=tuple(raw.get("conditions", ())),
            last_good=_good(raw.get("lastGoodSpec")),
            rolled_back=_rollback(raw.get("rolledBack")),
            offset_reset=_applied_reset(raw.get("offsetReset")),
            executor_secrets=(
                tuple(str(s) for s in raw["executorSecrets"])
                if raw.get("executorSecrets") is not None
                else None
            ),
            standby=_standby(raw.get("standby")),
        )

    def to_patch(self) -> dict[str, Any]:
        """The whole status as a merge patch (``None`` clears a field)."""
        return {
            "phase": self.phase.value,
            "epoch": self.epoch,
            "driverPod": self.driver_pod,
            "image": self.image,
            "specHash": self.spec_hash,
            "stopReason": self.stop_reason.value if self.stop_reason else None,
            "failures": self.failures,
            "nextStartAt": self.next_start_at,
            "restarts": self.restarts,
            "observedGeneration": self.observed_generation,
            "lastCommit": _last_commit_patch(self.last_commit) if self.last_commit else None,
            "lag": _lag_patch(self.lag) if self.lag else None,
            "message": bounded(self.message),
            "conditions": [_bounded_condition(c) for c in self.conditions],
            "lastGoodSpec": (
                {
                    "specHash": self.last_good.spec_hash,
                    "image": self.last_good.image,
                    "spec": self.last_good.spec,
                }
                if self.last_good
                else None
            ),
            "rolledBack": (
                {
                    "image": self.rolled_back.image,
                    "specHash": self.rolled_back.spec_hash,
                    "reason": bounded(self.rolled_back.reason),
                    "time": self.rolled_back.time,
                }
                if self.rolled_back
                else None
            ),
            "offsetReset": dataclasses.asdict(self.offset_reset) if self.offset_reset else None,
            "executorSecrets": (
                list(self.executor_secrets) if self.executor_secrets is not None else None
            ),
            "standby": _standby_patch(self.standby),
        }


def _bounded_condition(condition: Mapping[str, Any]) -> dict[str, Any]:
    message = condition.get("message")
    return {**condition, "message": bounded(message)} if message else dict(condition)


def _good(raw: Mapping[str, Any] | None) -> GoodSpec | None:
    if not raw:
        return None
    return GoodSpec(str(raw["specHash"]), str(raw["image"]), str(raw["spec"]))


def _standby_patch(standby: Standby | None) -> dict[str, Any] | None:
    if standby is None:
        return None
    patch: dict[str, Any] = {
        "pod": standby.pod,
        "epoch": standby.epoch,
        "specHash": standby.spec_hash,
        "image": standby.image,
        "state": standby.state.value,
        "message": bounded(standby.message),
        "purpose": standby.purpose.value,
        "failures": standby.failures,
    }
    if standby.since is not None:
        patch["since"] = standby.since
    return patch


def _standby(raw: Mapping[str, Any] | None) -> Standby | None:
    if not raw:
        return None
    return Standby(
        str(raw["pod"]),
        int(raw["epoch"]),
        str(raw["specHash"]),
        str(raw["image"]),
        StandbyState(raw["state"]),
        str(raw.get("message") or ""),
        StandbyPurpose(raw.get("purpose") or StandbyPurpose.UPGRADE),
        int(raw.get("failures") or 0),
        raw.get("since"),
    )


def _applied_reset(raw: Mapping[str, Any] | None) -> AppliedReset | None:
    if not raw:
        return None
    return AppliedReset(str(raw["id"]), str(raw["to"]), int(raw["epoch"]), str(raw["time"]))


def _rollback(raw: Mapping[str, Any] | None) -> Rollback | None:
    if not raw:
        return None
    return Rollback(str(raw["image"]), str(raw["specHash"]), str(raw["reason"]), str(raw["time"]))


@dataclass(frozen=True)
class Observed:
    """Everything one reconcile of one pipeline looks at."""

    name: str
    namespace: str
    uid: str
    generation: int
    spec: PipelineSpec | None
    spec_error: str | None
    status: Status
    pods: tuple[PodView, ...]
    nodes: Mapping[str, NodeView]
    deleting: bool
    now: datetime
    raw_spec: Mapping[str, Any] = field(default_factory=dict)
    unknown_fields: tuple[str, ...] = ()
    """Spec fields this operator does not know, set aside (``unknown_fields``)."""
    progress: DriverProgress | None = None
    """What the current driver reports about its commits (its /metrics), if read."""
    rolling_back: bool = False
    """``spec`` is the last good spec, run instead of a failed upgrade (``decide``)."""
    standby_progress: DriverProgress | None = None
    """What the standby reports (its /metrics) while it is live: a warm handover's
    while it starts, a hot standby's until it is promoted."""
    driver_silent_seconds: float | None = None
    """How long the current driver, which answered before, has not been connected to
    at all (``scrapes.Readings.silent_for``); ``None`` while it is (or never was)."""
    any_node_ready: bool = True
    """Whether any node of the cluster is Ready (the operator's node watch). With none,
    no node counts as lost (``steps.node_lost``): every heartbeat went stale at once,
    which is the API server's or the controller-manager's outage, not the nodes'."""
    secret_refusals: tuple[str, ...] = ()
    """Secrets the spec names that it may not use (``consent``), one line each; read
    while no driver runs (before a pod is created), and every
    ``consent_recheck_seconds`` for the spec a running driver was started with
    (``consent_rechecked``)."""
    endpoint_refusals: tuple[str, ...] = ()
    """Secrets the spec would send where their ``sluice.dev/allowed-endpoints``
    annotation (or the platform's requirement of one) does not let them go
    (``consent.endpoint_refusals``), one line each; read when ``secret_refusals`` is."""
    env_refusals: tuple[str, ...] = ()
    """``envFrom`` ConfigMaps and Secrets whose keys make reserved variables, or that do
    not exist (``envfrom.refusals``), one line each; read when ``secret_refusals`` is
    and none of them refuses (so a Secret is read only once the platform consented)."""
    consent_rechecked: bool = False
    """The refusals were read for the spec the running driver was started with: any of
    them means consent was withdrawn while it ran."""


def _lag(raw: Mapping[str, Any]) -> Lag:
    age = raw.get("oldestMessageAgeSeconds")
    return Lag(int(raw["records"]), str(raw["time"]), int(age) if age is not None else None)


def _last_commit_patch(commit: LastCommit) -> dict[str, Any]:
    """Without ``epoch`` when unknown (a status written before epochs were): a new last
    commit always has one, so none is left behind by the merge."""
    patch: dict[str, Any] = {"batchId": commit.batch_id, "time": commit.time}
    if commit.epoch is not None:
        patch["epoch"] = commit.epoch
    return patch


def _lag_patch(lag: Lag) -> dict[str, Any]:
    patch: dict[str, Any] = {"records": lag.records, "time": lag.time}
    if lag.oldest_age is not None:
        patch["oldestMessageAgeSeconds"] = lag.oldest_age
    return patch
