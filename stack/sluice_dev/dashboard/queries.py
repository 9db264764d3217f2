"""The dashboard's queries as Grafana sends them: every target's ``expr`` with the
dashboard's variables replaced (``$pipeline``, a regular expression of pipelines;
``$__rate_interval``, Grafana's rate window), and its legend format filled from a
series' labels. Purely computational."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sluice_dev.paths import REPO_ROOT

DASHBOARD: Final = REPO_ROOT / "charts" / "sluice" / "files" / "dashboard.json"
KEY_PANELS: Final = (
    "Throughput",
    "Consumer lag",
    "Batch phase duration",
    "Commits",
)
"""Title prefixes of the panels a person looks at first: throughput, lag, batch
latency and commits over time."""


@dataclass(frozen=True)
class Query:
    panel: str
    """The panel's title."""
    expr: str
    """The target's expression as the dashboard holds it (variables unreplaced)."""
    legend: str
    """Its legendFormat (``{{label}}`` placeholders), or ``""``."""

    @property
    def key(self) -> bool:
        return self.panel.startswith(KEY_PANELS)


def load(path: Path = DASHBOARD) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def queries(dashboard: Mapping[str, Any]) -> list[Query]:
    """Every panel target's query, in the dashboard's order."""
    found = []
    for panel in dashboard.get("panels", ()):
        for target in panel.get("targets", ()):
            if target.get("expr"):
                found.append(
                    Query(
                        str(panel["title"]), str(target["expr"]), target.get("legendFormat") or ""
                    )
                )
    return found


def rate_interval(scrape_seconds: float, step_seconds: float) -> str:
    """Grafana's ``$__rate_interval``: ``max($__interval + scrape, 4 * scrape)``."""
    return f"{max(step_seconds + scrape_seconds, 4 * scrape_seconds):g}s"


def substitute(expr: str, *, pipeline: str = ".*", rate: str = "1m") -> str:
    """``expr`` with the dashboard's variables replaced: ``pipeline`` is the
    ``$pipeline`` regular expression (the variable's "All" is ``.*``)."""
    replaced = expr.replace("$__rate_interval", rate).replace("${__rate_interval}", rate)
    return re.sub(r"\$\{pipeline\}|\$pipeline\b", lambda _m: pipeline, replaced)


def exactly(text: str) -> str:
    """``text`` as a ``$pipeline`` value that matches itself only: RE2's special
    characters escaped, the backslash doubled for PromQL's string literal
    (``re.escape`` would also escape ``-``, which PromQL refuses: "unknown escape
    sequence")."""
    return re.sub(r"([.+*?()|\[\]{}^$\\])", r"\\\\\1", text)


def legend(template: str, labels: Mapping[str, str]) -> str:
    """A series' name as the panel's legend shows it."""
    if not template:
        return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template)
