"""Automatic rollback: which spec runs while a failed upgrade is rolled back, and
whether a driver that gave up may be rolled back. ``decide`` starts the driver.

While ``status.rolledBack`` names the driver fields of the user's current spec, the
last good spec's driver fields run, with the user's operator fields (suspend,
restart, failover), so those still apply; a change of the driver fields ends it."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Final

from sluice_api.spec import PipelineSpec
from sluice_operator import changes
from sluice_operator.model import Observed, Rollback, Status

ROLLED_BACK: Final = "RolledBack"


def effective(obs: Observed, spec: PipelineSpec) -> Observed:
    """The spec to run: the user's, or, while it is the upgrade that failed and was
    rolled back, the last good spec's driver fields with the user's operator fields
    (so suspend, restart and failover settings still apply during a rollback)."""
    rolled, good = obs.status.rolled_back, obs.status.last_good
    if rolled is None or good is None or changes.spec_hash(spec) != rolled.spec_hash:
        return obs
    mine = spec.model_dump(mode="json", by_alias=True)
    operator_fields = {k: v for k, v in mine.items() if k in changes.OPERATOR_ONLY}
    try:
        previous = PipelineSpec.model_validate({**json.loads(good.spec), **operator_fields})
    except ValueError:
        return obs  # a good spec this version cannot read: run the user's
    return replace(obs, spec=previous, rolling_back=True)


def may_roll_back(obs: Observed, spec: PipelineSpec, status: Status) -> bool:
    """The driver of the current spec gave up, and an older spec committed (and can
    still be read): roll back to it."""
    good = status.last_good
    mine = changes.spec_hash(spec)
    if not spec.upgrade.rollback or obs.rolling_back or good is None:
        return False
    if status.spec_hash != mine or good.spec_hash == mine:
        return False
    probe = replace(status, rolled_back=Rollback("", mine, "", ""))
    return effective(replace(obs, status=probe), spec).rolling_back
