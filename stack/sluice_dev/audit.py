"""The local API server's audit log, read back: which requests a client made in a
time window, so a test can count what the operator asks of the control plane (its
calls carry the user agent ``sluice-operator``; kopf's carry ``kopf/...``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(frozen=True)
class Request:
    verb: str
    resource: str
    """``pods``, ``streamingpipelines/status``: the resource and its subresource."""
    namespace: str
    name: str
    user_agent: str
    received: datetime

    @property
    def writes(self) -> bool:
        return self.verb in WRITES


def requests(log: Path, since: datetime, until: datetime, agent: str) -> list[Request]:
    """Completed requests received in ``[since, until)`` whose user agent starts with
    ``agent``. Long-running watches are left out: they are streams, not calls."""
    return [
        r
        for r in _read(log)
        if since <= r.received < until and r.user_agent.startswith(agent) and r.verb != "watch"
    ]


def _read(log: Path) -> Iterator[Request]:
    for path in (log.with_name(log.stem + "-*" + log.suffix), log):
        files = sorted(log.parent.glob(path.name)) if "*" in path.name else [path]
        for file in files:
            if file.exists():
                yield from _parse(file.read_text(errors="replace"))


def _parse(text: str) -> Iterator[Request]:
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being written
        if entry.get("stage") != "ResponseComplete":
            continue
        ref = entry.get("objectRef") or {}
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource = f"{resource}/{ref['subresource']}"
        yield Request(
            verb=entry.get("verb", ""),
            resource=resource,
            namespace=ref.get("namespace", ""),
            name=ref.get("name", ""),
            user_agent=entry.get("userAgent", ""),
            received=datetime.fromisoformat(entry["requestReceivedTimestamp"]),
        )
