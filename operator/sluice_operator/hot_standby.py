"""The decisions about a hot standby (``spec.standby: 1``) that stand on their own:
when one is wanted, when one is no longer wanted, what a failed one leaves behind
and when the next may start. Pure: ``decide`` calls them and carries out the rest.

Why a hot standby: a killed driver otherwise costs a new pod, a JVM, a SparkSession
and its connections before the next commit. A second driver of the running spec,
started and warm, takes over instead: the operator promotes it (``Promote``) when the
driver's pod fails, is deleted or its node is lost, and it claims the epoch it was
started with, fencing the old driver exactly as a restarted one would. Then a new
standby starts, once the promoted one runs its loop. A standby that fails (exits,
is not ready by ``restart.startDeadlineSeconds``, its node is lost) is removed and
started again after the restart back-off; the driver is never touched for it.

A driver whose node crashed gives no exit and its pod says Running until the node
counts as lost (the node grace, then ``failover.nodeLostSeconds``): 17 s to the next
commit in a soak with a standby, against a 5 s target. The operator reads every
driver's ``/metrics`` each second; a driver that answered before and now cannot be
connected to for :data:`SILENT_SECONDS` while its Ready standby answers is taken for
gone (``silent``), and the standby promoted. The fence makes a wrong guess safe: a
driver that was alive after all is fenced by the standby's claim and exits, which
costs one handover.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Final

from sluice_api import termination
from sluice_api.exitcodes import ExitCode
from sluice_api.spec import PipelineSpec
from sluice_operator import changes
from sluice_operator.actions import Action, Emit, RemovePod
from sluice_operator.model import Observed, PodPhase, PodView, Standby, StandbyState, Status

SILENT_SECONDS: Final = 0.5
"""A driver not connected to for this long (three of the operator's reads at least, a
quarter second apart: ``scrapes.Readings`` follows a driver with a Ready standby and
reads it again each ``RECHECK_SECONDS`` once it fell silent) is gone, if its hot
standby is Ready and answers. A refused connection comes back at once, so this is the
wait; a loaded driver's kernel still accepts its connections. With 2 s, a soak's node
crash took 4.4 s to the promotion at load 7.5; with 1 s and reads a second apart, the
claim came 2.2 s after the crash (p50, load 6) and the next commit 5.4 s after, over
the 5 s target."""


REPLACE_SILENT_SECONDS: Final = 2.0
"""Without a hot standby, a driver not connected to for this long while its pod says
Running gets its replacement started (:func:`replacing`), promoted only when its node
counts as lost or its pod ends. A crashed node's driver is silent at once, but its
node stays Ready for the node grace (10 s in the local stack, 40 s by Kubernetes'
default): a replacement started at the NotReady had ``nodeLostSeconds`` to start a
JVM and was promoted in the middle of its warm-up. Longer than it takes a dead
process's pod to say so (a SIGKILLed driver is restarted as before), so the early
start costs a JVM only when the driver's node or network is gone or it is hung."""


def cancel_reason(
    obs: Observed, spec: PipelineSpec, standby: Standby, current: PodView | None
) -> str:
    """Why the hot standby ``standby`` is no longer wanted ("" if it still is)."""
    if obs.deleting:
        return "the pipeline is being deleted"
    if spec.suspend:
        return "the pipeline is suspended"
    if spec.standby == 0 and not replacing(obs, current):
        return "spec.standby is 0, the driver's node is Ready and the driver answers"
    if standby.spec_hash != changes.spec_hash(spec):
        return "the spec changed: the new spec's driver gets its own standby"
    if current is not None and current.exit_code == ExitCode.INVALID_CONFIG:
        return "the driver refused its configuration (exit 2): so would its standby"
    return ""


def failed(
    standby: Standby, pod: PodView | None, now: datetime, why: str
) -> tuple[Standby, list[Action]]:
    """The record of a hot standby that failed, and what to do: remove its pod, tell."""
    message = termination.parse(pod.message) if pod is not None else None
    detail = (message.message if message else "") or (pod.message if pod else "")
    code = f" exited {pod.exit_code}" if pod is not None and pod.exit_code is not None else ""
    text = f"hot standby {standby.pod}{code}: {why}" + (f": {detail}" if detail else "")
    record = replace(
        standby,
        state=StandbyState.FAILED,
        message=text,
        failures=standby.failures + 1,
        since=now.isoformat(),
    )
    told: list[Action] = [Emit("Warning", "StandbyFailed", f"{text}; the driver goes on")]
    if pod is not None:
        told.append(RemovePod(pod.name))
    return record, told


def retry_in(spec: PipelineSpec, previous: Standby | None, now: datetime) -> float:
    """Seconds before a new hot standby may start: 0 unless the last one failed, then
    the restart back-off of its failures in a row (``backoffSeconds`` doubling up to
    ``maxBackoffSeconds``), from when it failed."""
    if previous is None or not previous.hot or previous.state is not StandbyState.FAILED:
        return 0.0
    if previous.spec_hash != changes.spec_hash(spec) or previous.since is None:
        return 0.0
    doubled = spec.restart.backoff_seconds * (1 << max(0, previous.failures - 1))
    delay = min(doubled, spec.restart.max_backoff_seconds)
    waited = (now - datetime.fromisoformat(previous.since)).total_seconds()
    return max(0.0, delay - waited)


def wanted(obs: Observed, spec: PipelineSpec, status: Status, pod: PodView) -> bool:
    """A hot standby should be started now: asked for, none live, and the driver
    ``pod`` has claimed the current epoch and has its first batch behind it (it
    committed one, or its lag says it has nothing to read). A standby started
    alongside a driver's own start, or its first batch, would only slow both: in a
    chaos run on two cores a promoted standby's first batch (the one that ends the
    failover) took 17.7 s while the next standby's JVM started beside it, and the
    batches after it 3-6 s; and a standby started before the driver's first commit
    gets ready with no committed records to warm up on. A driver too old to report
    its batches says it has claimed only once it has committed."""
    if spec.standby < 1 or (status.standby is not None and status.standby.live):
        return False
    if pod.phase is not PodPhase.RUNNING or pod.deleting:
        return False
    report = obs.progress
    if report is None or report.epoch != status.epoch or report.standby_ready:
        return False
    if not report.claimed:
        return False
    return report.commits is None or report.commits > 0 or report.lag == 0


def promotable(standby: Standby, pod: PodView | None) -> bool:
    """The standby may take over if the driver goes: a Ready one, or a hot one still
    warming up whose pod runs. The latter is further along than a cold start (its
    JVM, imports and connections are on their way), so it is promoted and claims
    once it is ready (``_running_steadily`` sends the promotion again while it
    reports itself waiting); a pending pod is not, and may never be scheduled."""
    if standby.state is StandbyState.READY:
        return True
    return (
        standby.hot
        and standby.state is StandbyState.STARTING
        and pod is not None
        and pod.phase is PodPhase.RUNNING
        and not pod.deleting
    )


def failures_in_a_row(status: Status) -> int:
    """Failures of the last hot standby in a row (0 after one became ready)."""
    previous = status.standby
    if previous is None or not previous.hot or previous.state is not StandbyState.FAILED:
        return 0
    return previous.failures


def silent(obs: Observed, spec: PipelineSpec, standby: Standby, current: PodView | None) -> bool:
    """The driver ``current`` runs by its pod, but has not been connected to for
    :data:`SILENT_SECONDS` (its process or its node is gone), while the Ready hot
    standby ``standby`` answers with its epoch: the standby takes over. Not a
    replacement (``spec.standby: 0``): it waits for ``failover.nodeLostSeconds``."""
    if not standby.hot or standby.state is not StandbyState.READY or spec.standby < 1:
        return False
    if current is None or current.terminated or current.deleting:
        return False
    if obs.driver_silent_seconds is None or obs.driver_silent_seconds < SILENT_SECONDS:
        return False
    report = obs.standby_progress
    return report is not None and report.epoch == standby.epoch


def look_again_in(obs: Observed, spec: PipelineSpec, standby: Standby | None) -> float | None:
    """Seconds until the driver's silence would make a Ready hot standby take over
    (:func:`silent`), so the next look comes then; ``None`` if it answers."""
    silence = obs.driver_silent_seconds
    if standby is None or not standby.hot or standby.state is not StandbyState.READY:
        return None
    if spec.standby < 1:
        return None
    if silence is None:
        return None
    return max(SILENT_SECONDS - silence, 0.2)


def replacing(obs: Observed, current: PodView | None) -> bool:
    """The driver ``current`` runs on a node that is NotReady, not lost yet, or has
    not been connected to for :data:`REPLACE_SILENT_SECONDS` while its pod says
    Running: without a hot standby (``spec.standby: 0``), its replacement starts now,
    as a hot standby of the running spec, and is promoted if the node counts as lost
    (``failover.nodeLostSeconds``) or the driver's pod ends, or removed once the node
    is Ready and the driver answers again. While no node is Ready (the control
    plane's outage, ``steps.node_lost``) only the driver's silence counts."""
    if current is None or current.terminated or current.deleting or current.node is None:
        return False
    node = obs.nodes.get(current.node)
    if node is not None and not node.ready and obs.any_node_ready:
        return True
    silence = obs.driver_silent_seconds
    return silence is not None and silence >= REPLACE_SILENT_SECONDS


def replacement_reason(obs: Observed, spec: PipelineSpec, pod: PodView) -> str:
    """Why the replacement of :func:`replacing` starts, for its log line and Event."""
    node = obs.nodes.get(pod.node or "")
    then = f"promoted if the node is lost for {spec.failover.node_lost_seconds}s or {pod.name} ends"
    if node is not None and not node.ready:
        return f"node {pod.node} of {pod.name} is NotReady: its replacement starts now, {then}"
    silence = obs.driver_silent_seconds or 0.0
    return (
        f"{pod.name} on node {pod.node} not reached for {silence:.1f}s: its replacement "
        f"starts now, {then}"
    )


def replace_in(obs: Observed, spec: PipelineSpec, standby: Standby | None) -> float | None:
    """Seconds until a driver that is silent, but not for long enough yet, would get
    its replacement (:func:`replacing`), so the next look comes then; ``None`` if it
    answers, or a standby is asked for or live."""
    silence = obs.driver_silent_seconds
    if spec.standby > 0 or silence is None or (standby is not None and standby.live):
        return None
    return max(REPLACE_SILENT_SECONDS - silence, 0.2)


def replacement_wanted(obs: Observed, spec: PipelineSpec, status: Status, pod: PodView) -> bool:
    """Start the replacement of :func:`replacing` now: no hot standby is asked for,
    none is live, and the driver ``pod`` runs on a NotReady node or is silent. It
    claims at once when promoted (a promotion cuts its warm-up short): in the soak
    without a standby a crashed node's driver was replaced 27.0 s after the crash, its
    successor claiming 19.1 s after it (10 s of node grace, 5 of ``nodeLostSeconds``,
    4 of start), when the replacement started at the NotReady."""
    if spec.standby > 0 or (status.standby is not None and status.standby.live):
        return False
    return pod.phase is PodPhase.RUNNING and replacing(obs, pod)
