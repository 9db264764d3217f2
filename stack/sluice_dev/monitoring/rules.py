"""The shipped alerting rules (``charts/sluice/files/alerts.yaml``) as the demo and
the alert tests read them: each alert's ``for:`` in seconds and its severity, so a
promise is computed from the rule it is about, never restated. Purely computational."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import yaml

from sluice_dev.paths import REPO_ROOT

RULES = REPO_ROOT / "charts" / "sluice" / "files" / "alerts.yaml"
UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds(duration: str) -> float:
    """A Prometheus duration (``1m``, ``1h30m``, ``500ms``) in seconds."""
    parts = re.findall(r"(\d+)(ms|s|m|h|d)", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a Prometheus duration: {duration!r}")
    return sum(int(n) * UNITS[u] for n, u in parts)


@cache
def rules() -> dict[str, dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {r["alert"]: r for g in groups for r in g["rules"] if "alert" in r}


def for_seconds(alert: str) -> float:
    """The rule's ``for:`` (0 without one: it fires at the first evaluation)."""
    return seconds(str(rules()[alert].get("for", "0s")))


def severity(alert: str) -> str:
    return str(rules()[alert]["labels"]["severity"])
