"""A driver that failed: counted in a row, restarted after a back-off, Failed at
``restart.maxFailures``, or its upgrade rolled back (``rollback``) when it was the
driver of a changed spec. An exit, a pod that never ran and a pod the API server
refused all count the same. Pure, like ``decide``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from sluice_api.spec import PipelineSpec
from sluice_operator import changes, launch, rollback, steps
from sluice_operator.actions import Action, Decision, Emit, RemovePod
from sluice_operator.conditions import set_condition, with_ready
from sluice_operator.lifecycle import Seen
from sluice_operator.model import Observed, PodView, Rollback, Status
from sluice_operator.settings import DEFAULTS, Settings


def failed(
    obs: Observed,
    spec: PipelineSpec,
    status: Status,
    pod: PodView,
    why: str,
    actions: list[Action],
    settings: Settings,
) -> Decision:
    """A driver that exited with a failure: one more failure in a row."""
    text = f"{pod.name} exited {pod.exit_code}: {why}".strip()
    return count_failure(obs, spec, status, text, actions, settings, exited=pod.name)


def count_failure(
    obs: Observed,
    spec: PipelineSpec,
    status: Status,
    text: str,
    actions: list[Action],
    settings: Settings,
    *,
    exited: str | None = None,
    min_delay: int = 0,
) -> Decision:
    """One more failure in a row: Failed at ``restart.maxFailures``, else a restart
    after :func:`restart_delay` (at least ``min_delay``). ``exited`` names the pod of
    a driver that exited, removed when its successor starts."""
    failures = status.failures + 1
    if failures >= spec.restart.max_failures and rollback.may_roll_back(obs, spec, status):
        return roll_back(obs, spec, status, text, actions, settings)
    if failures >= spec.restart.max_failures:
        status = replace(
            status,
            phase=steps.after(obs, Seen.GAVE_UP),
            failures=failures,
            driver_pod=None,
            observed_generation=obs.generation,
            message=f"{failures} failures in a row; last: {text}",
        )
        actions.append(Emit("Warning", "Failed", status.message))
        return Decision((*actions, *steps.write(obs, with_ready(status, obs))))
    delay = max(restart_delay(spec, failures), min_delay)
    status = replace(
        status,
        phase=steps.after(obs, Seen.EXITED_FAILED),
        failures=failures,
        driver_pod=None,
        restarts=status.restarts + 1,
        next_start_at=(obs.now + timedelta(seconds=delay)).isoformat() if delay else None,
        message=text,
    )
    if not delay:
        actions.append(Emit("Warning", "DriverFailed", f"{text}; restarting now"))
        removed = [RemovePod(exited)] if exited else []
        return launch.start(obs, spec, status, status.phase, [*actions, *removed], settings)
    actions.append(Emit("Warning", "DriverFailed", f"{text}; restarting in {delay}s"))
    return Decision((*actions, *steps.write(obs, with_ready(status, obs))), float(delay))


def restart_delay(spec: PipelineSpec, failures: int) -> int:
    """Seconds before restarting after ``failures`` failures in a row: none after the
    first (a crash after a healthy run costs no wait, as a kubelet restarts a container
    at once the first time), then ``backoffSeconds`` doubling up to its cap."""
    if failures <= 1:
        return 0
    doubled = spec.restart.backoff_seconds * (1 << (failures - 2))
    return min(doubled, spec.restart.max_backoff_seconds)


def roll_back(
    obs: Observed,
    spec: PipelineSpec,
    status: Status,
    text: str,
    actions: list[Action],
    settings: Settings,
) -> Decision:
    """Run the last good spec again (``rollback``): the failed upgrade is recorded in
    ``status.rolledBack`` and said (condition and Event), its failures forgotten."""
    good = status.last_good
    assert good is not None
    failed = Rollback(status.image or "", changes.spec_hash(spec), text, obs.now.isoformat())
    message = f"upgrade to {failed.image} failed, rolled back to {good.image}: {text}"
    status = replace(
        status,
        failures=0,
        next_start_at=None,
        driver_pod=None,
        rolled_back=failed,
        message=message,
        restarts=status.restarts + 1,
        conditions=set_condition(
            status, rollback.ROLLED_BACK, "True", "UpgradeFailed", message, obs
        ),
    )
    actions.append(
        Emit(
            "Warning",
            rollback.ROLLED_BACK,
            f"{message}; {good.image} runs until the spec changes again",
        )
    )
    back = rollback.effective(replace(obs, status=status), spec)
    assert back.spec is not None, "checked by _may_roll_back"
    return launch.start(
        back, back.spec, status, steps.after(obs, Seen.ROLLED_BACK), actions, settings
    )


def after_rejection(
    obs: Observed, status: Status, why: str, *, reason: str = "DriverRejected"
) -> Decision:
    """The API server refused to create the driver pod ``status`` names (admission,
    quota, an invalid field), or an object it needs is someone else's (``reason``
    ``NotOwned``): a failure like an exit, retried after a back-off (never at once:
    the same pod would be refused again), Failed after ``maxFailures``. So a refused
    pod costs one epoch per attempt, not one per reconcile."""
    assert obs.spec is not None, "a pod is only created for a valid spec"
    cause = "was refused by the API server" if reason == "DriverRejected" else "was not created"
    text = f"{status.driver_pod} {cause}: {why}"
    told: list[Action] = [Emit("Warning", reason, text)]
    after = replace(obs, status=status)
    written = replace(status, driver_pod=None)
    floor = max(obs.spec.restart.backoff_seconds, 1)
    return count_failure(after, obs.spec, written, text, told, DEFAULTS, min_delay=floor)
