"""The side effects a reconcile may ask for, as values: ``decide`` returns them in
order, ``apply`` performs them one by one. The order is the write-ahead rule:
the status naming a new epoch is written before the pod of that epoch exists."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluice_operator.model import Status


@dataclass(frozen=True)
class WriteStatus:
    status: Status


@dataclass(frozen=True)
class EnsureObjects:
    """Create these if missing (ServiceAccount, Role, RoleBinding, Service)."""

    manifests: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class CreatePod:
    manifest: dict[str, Any]


@dataclass(frozen=True)
class StopPod:
    """A clean stop: delete with the pod's grace period (SIGTERM, then SIGKILL)."""

    name: str


@dataclass(frozen=True)
class RemovePod:
    """Delete the object at once (grace 0): a terminated pod, or one on a lost node."""

    name: str


@dataclass(frozen=True)
class Emit:
    """A Kubernetes Event on the pipeline."""

    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class Promote:
    """Tell the hot standby in pod ``pod`` (address ``ip``) to claim ``epoch``."""

    pod: str
    ip: str
    epoch: int


Action = WriteStatus | EnsureObjects | CreatePod | StopPod | RemovePod | Emit | Promote


@dataclass(frozen=True)
class Decision:
    actions: tuple[Action, ...] = ()
    requeue_after: float | None = None
    finished: bool = False
    """For a deleted pipeline: every driver is gone, the finalizer may go."""
