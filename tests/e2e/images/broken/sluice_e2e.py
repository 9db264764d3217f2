"""Code of the end-to-end job image ``broken``: an upgrade whose transform raises on
every batch, so its driver exits 1 without committing (the rollback test)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame

from sluice_job.transform import TransformResult

VERSION = "broken"


def transform(records: DataFrame, options: Mapping[str, Any]) -> TransformResult:
    del records, options
    raise RuntimeError("the broken image's transform fails on purpose")
