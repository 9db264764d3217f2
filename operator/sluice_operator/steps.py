"""The small steps every rule of ``decide`` takes, whichever case it is in.

The phase that follows what was seen (``lifecycle``), a status write only when the
status changed, the last commit a driver reported as it exited, whether the spec
changed in a field the driver reads, and whether (and when) a driver's node counts as
lost. Pure, like ``decide``.
"""

from __future__ import annotations

from dataclasses import replace

from sluice_api import termination
from sluice_api.spec import PipelineSpec
from sluice_operator import changes, reports
from sluice_operator.actions import Action, WriteStatus
from sluice_operator.lifecycle import Seen, next_phase
from sluice_operator.model import Observed, Phase, PodView, Status
from sluice_operator.progress import DriverProgress


def after(obs: Observed, seen: Seen) -> Phase:
    """The phase that follows the pipeline's present one once ``seen`` happened."""
    return next_phase(obs.status.phase, seen)


def write(obs: Observed, status: Status) -> tuple[Action, ...]:
    """The status write, only when ``status`` differs from the one observed."""
    return (WriteStatus(status),) if status != obs.status else ()


def note_exit(status: Status, pod: PodView) -> Status:
    """Record the last commit a driver reported when it exited (at its exit time), as
    its last report (``reports.follow``): a fenced driver's never replaces a newer
    epoch's."""
    message = termination.parse(pod.message)
    batch = message.last_batch_id if message else None
    if batch is None or batch <= 0 or pod.finished_at is None:
        return status
    said = DriverProgress(pod.epoch, batch, pod.finished_at, lag=None)
    return replace(status, last_commit=reports.follow(status.last_commit, said, 0.0))


def changed(status: Status, spec: PipelineSpec) -> bool:
    """Whether ``spec`` differs from the running driver's in a field the driver reads."""
    return changes.classify(status.spec_hash, spec) is changes.Change.RESTART


def node_lost(obs: Observed, spec: PipelineSpec, pod: PodView) -> bool:
    """Whether the node ``pod`` runs on is gone, or NotReady for at least
    ``failover.nodeLostSeconds``; a pod on no node yet is on no lost node. While no
    node of the cluster is Ready, a NotReady node is not lost: like the node
    lifecycle controller, which evicts nothing from a zone where every node is
    NotReady, the operator takes that for the control plane's outage (in the soak,
    20 s without the API server made both nodes NotReady while their drivers
    committed)."""
    if pod.node is None:
        return False
    node = obs.nodes.get(pod.node)
    if node is None:
        return True
    if node.ready or node.not_ready_since is None or not obs.any_node_ready:
        return False
    lost_for = (obs.now - node.not_ready_since).total_seconds()
    return lost_for >= spec.failover.node_lost_seconds


def until_node_lost(obs: Observed, pod: PodView) -> float | None:
    """Seconds until the pod's NotReady node counts as lost (so the next look comes
    when failover is due, not a requeue interval later); None while it is Ready."""
    node = obs.nodes.get(pod.node) if pod.node else None
    if node is None or node.ready or node.not_ready_since is None or obs.spec is None:
        return None
    if not obs.any_node_ready:
        return None
    lost_for = (obs.now - node.not_ready_since).total_seconds()
    return max(obs.spec.failover.node_lost_seconds - lost_for, 0.0)
