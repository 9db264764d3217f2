"""A pipeline's phase as one pure function: ``next_phase(phase, seen)``.

``decide`` reduces each observation to one :class:`Seen` (what happened to the
driver, the spec or the node) and takes the pipeline's next phase from here, so the
lifecycle is one table a reader and a test can check whole (every phase against
every observation, in ``tests/unit/test_lifecycle.py``), while ``decide`` keeps the
actions (which pod to create or stop, what to write and tell).
"""

from __future__ import annotations

from enum import StrEnum

from sluice_api.status import Phase


class Seen(StrEnum):
    """What a reconcile found, as far as the phase is concerned."""

    INVALID_SPEC = "invalid spec"
    """The spec does not validate: nothing may run."""
    STOP_ASKED = "stop asked"
    """Deleted or suspended while a driver still runs: it stops cleanly."""
    STOPPED = "stopped"
    """Suspended and no driver runs any more."""
    UNCHANGED_SINCE_FAILURE = "unchanged since failure"
    """No driver, the pipeline Failed, and its spec has not changed since."""
    BACKING_OFF = "backing off"
    """No driver while a restart back-off runs."""
    NEVER_STARTED = "never started"
    """No driver and no epoch yet: the first start."""
    DRIVER_GONE = "driver gone"
    """No driver pod, epoch > 0 (removed by someone, or an operator restarted between
    removing one pod and creating the next): start the next epoch."""
    STOPPED_FOR_UPGRADE = "stopped for upgrade"
    """The driver exited 0 after the spec changed: start the new spec."""
    EXITED_CLEAN = "exited clean"
    """The driver exited 0 by itself: start it again."""
    EXITED_INVALID = "exited invalid"
    """Exit 2: the driver refused its configuration; restarting cannot help."""
    EXITED_FENCED = "exited fenced"
    """Exit 3: a newer epoch holds the checkpoint; start a newer one."""
    EXITED_FAILED = "exited failed"
    """A failure below ``restart.maxFailures`` in a row: any other exit, a pod not
    running by ``restart.startDeadlineSeconds``, a pod the API server refused."""
    GAVE_UP = "gave up"
    """The ``restart.maxFailures``-th failure in a row (and no rollback)."""
    ROLLED_BACK = "rolled back"
    """The driver of a changed spec failed ``restart.maxFailures`` times: the last
    spec that committed runs again."""
    NODE_LOST = "node lost"
    """The driver's node has been NotReady for ``failover.nodeLostSeconds``."""
    UPGRADE_STOPPING = "upgrade stopping"
    """The driver pod is being deleted for an upgrade."""
    DRIVER_STOPPING = "driver stopping"
    """The driver pod is being deleted for another reason."""
    SPEC_CHANGED = "spec changed"
    """The spec changed in a field the driver reads: stop it cleanly."""
    DRIVER_PENDING = "driver pending"
    """The current driver's pod exists but does not run yet."""
    DRIVER_RUNNING = "driver running"
    """The current driver runs."""


_STARTS = {Phase.UPGRADING, Phase.RECOVERING}


def next_phase(phase: Phase, seen: Seen) -> Phase:
    """The phase after ``seen`` happened in ``phase``."""
    match seen:
        case Seen.INVALID_SPEC | Seen.EXITED_INVALID | Seen.GAVE_UP:
            return Phase.FAILED
        case Seen.STOP_ASKED:
            return Phase.STOPPING
        case Seen.STOPPED:
            return Phase.SUSPENDED
        case Seen.UNCHANGED_SINCE_FAILURE | Seen.BACKING_OFF | Seen.DRIVER_STOPPING:
            return phase
        case Seen.NEVER_STARTED:
            return Phase.STARTING
        case Seen.DRIVER_GONE:
            return Phase.UPGRADING if phase is Phase.UPGRADING else Phase.RECOVERING
        case Seen.STOPPED_FOR_UPGRADE | Seen.UPGRADE_STOPPING | Seen.SPEC_CHANGED:
            return Phase.UPGRADING
        case (
            Seen.EXITED_CLEAN
            | Seen.EXITED_FENCED
            | Seen.EXITED_FAILED
            | Seen.NODE_LOST
            | Seen.ROLLED_BACK
        ):
            return Phase.RECOVERING
        case Seen.DRIVER_PENDING:
            return phase if phase in _STARTS else Phase.STARTING
        case Seen.DRIVER_RUNNING:
            return Phase.RUNNING
