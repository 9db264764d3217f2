"""When micro-batches start and how long one may take: ``spec.trigger``."""

from __future__ import annotations

from pydantic import Field

from sluice_api.spec_base import Model


class Trigger(Model):
    interval_seconds: float = Field(
        default=5.0, ge=0.0, le=3600.0, description="Seconds between micro-batch starts."
    )
    batch_timeout_seconds: float = Field(
        default=600.0,
        ge=1.0,
        le=86400.0,
        description=(
            "Seconds one attempt of a batch (read, transform, write, commit) may take. A "
            "batch that does not finish in time (a Spark job or a sink that hangs) ends "
            "the driver with exit 1 and reason BatchTimeout, so the operator restarts it; "
            "nothing of the batch is committed. Time spent waiting out a dependency "
            "outage does not count: each attempt has its own deadline."
        ),
    )
