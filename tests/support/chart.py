"""The chart's objects as the tests name them: rendered with the provisioned ``helm``
(never a copy) by :mod:`sluice_dev.localcluster`, which also applies what the chart
ships for drivers on the local stack."""

from __future__ import annotations

from typing import Final

from sluice_dev.localcluster import CHART, DRIVER_POD_POLICY, RELEASE, render_chart

__all__: Final = ["CHART", "DRIVER_POD_POLICY", "RELEASE", "render_chart"]
