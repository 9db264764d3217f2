"""Classifying a spec change: does the running driver have to be restarted?

A purely computational function. Fields the driver reads (image, source,
transform, sink, dead letters, checkpoint, trigger, Spark resources) need a clean
stop and a new driver; fields only the operator reads (upgrade, failover, restart
policies, hot standbys) apply at once; ``suspend`` is a lifecycle switch handled on its own.
The hash of the driver-relevant part is stored in the status and on the pod.
"""

from __future__ import annotations

import hashlib
import json
from enum import IntEnum
from typing import Final

from sluice_api.spec import PipelineSpec

OPERATOR_ONLY: Final = frozenset({"upgrade", "failover", "restart", "suspend", "standby"})


class Change(IntEnum):
    """Ordered by strength: combining changes takes the strongest."""

    IGNORE = 0
    RESTART = 1


def driver_view(spec: PipelineSpec) -> dict[str, object]:
    data = spec.model_dump(mode="json", by_alias=True)
    return {key: value for key, value in data.items() if key not in OPERATOR_ONLY}


def spec_hash(spec: PipelineSpec) -> str:
    text = json.dumps(driver_view(spec), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def classify(running_hash: str | None, spec: PipelineSpec) -> Change:
    """``running_hash`` is the hash the current driver was started with."""
    if running_hash is None or spec_hash(spec) == running_hash:
        return Change.IGNORE
    return Change.RESTART
