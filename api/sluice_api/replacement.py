"""When and how the operator replaces a pipeline's driver: ``spec.upgrade`` (a spec
change), ``spec.failover`` (a lost node) and ``spec.restart`` (a failed driver).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from sluice_api.spec_base import Model


class UpgradeMode(StrEnum):
    CLEAN_STOP = "CleanStop"
    """Stop the old driver cleanly, then start the new one (Spark starts in the gap)."""
    WARM_HANDOVER = "WarmHandover"
    """Start the new driver as a standby first; stop the old one once it is ready."""


class Upgrade(Model):
    mode: UpgradeMode = Field(
        default=UpgradeMode.CLEAN_STOP,
        description=(
            "CleanStop: stop the running driver cleanly, then start the new spec's. "
            "WarmHandover: start the new spec's driver as a standby first (Spark, Kafka, "
            "the stores and the transform checked on an empty frame, nothing claimed or "
            "written); only once it is ready is the running driver stopped cleanly, and the "
            "standby claims the next epoch as soon as that driver has released the "
            "checkpoint. A standby that fails to become ready leaves the running driver "
            "alone: the upgrade is reported failed (condition UpgradeFailed, an Event) "
            "until the spec changes again."
        ),
    )
    rollback: bool = Field(
        default=True,
        description=(
            "When the driver of a changed spec fails restart.maxFailures times in a row "
            "(exits, or pods not running within restart.startDeadlineSeconds), run the "
            "last spec that committed again, until the driver fields of the spec change."
        ),
    )
    stop_timeout_seconds: int = Field(
        default=120,
        ge=5,
        le=3600,
        description=(
            "Time a driver has to finish its batch on stop. A change applies to drivers "
            "started after it: the running one keeps the grace period its pod was created "
            "with (a pod's terminationGracePeriodSeconds cannot change)."
        ),
    )


class Failover(Model):
    node_lost_seconds: int = Field(
        default=45, ge=5, le=3600, description="Node unreachable this long: start elsewhere."
    )


class Restart(Model):
    backoff_seconds: int = Field(
        default=10,
        ge=0,
        le=3600,
        description=(
            "Delay before the second restart in a row, doubling for each further one; "
            "the first failure after a healthy run restarts at once."
        ),
    )
    max_backoff_seconds: int = Field(
        default=300, ge=0, le=86400, description="Cap of the exponential restart delay."
    )
    max_failures: int = Field(
        default=5, ge=1, le=1000, description="Failures in a row before the pipeline is Failed."
    )
    start_deadline_seconds: int = Field(
        default=300,
        ge=10,
        le=86400,
        description=(
            "A driver pod not running this long after its creation (unschedulable, image "
            "pull failing, a missing Secret or ConfigMap) is removed and counted as a failure."
        ),
    )
