"""The termination message: a small JSON document Kubernetes shows in the pod's
container status (``terminationMessagePath``). The driver writes it as it exits; the
operator reads it to learn why a driver stopped, where it left off, and (for a fenced
driver) which epoch holds the pipeline.

:meth:`Termination.to_json` and :func:`parse` are each other's inverse (a unit test
round-trips them); a message the operator cannot parse (a container that died before
writing one, or Kubernetes' fallback to the log tail) parses to ``None``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice_api.exitcodes import ExitCode

LIMIT = 4096
"""Bytes Kubernetes keeps of a termination message."""
MESSAGE_LIMIT = 1000
"""Characters of the human-readable message kept, so the offsets fit beside it."""

Offsets = Mapping[str, Mapping[str, int]]
"""``{topic: {"partition": next offset to read}}``, the checkpoint's own shape."""


@dataclass(frozen=True)
class Termination:
    exit_code: ExitCode
    reason: str
    message: str = ""
    last_batch_id: int | None = None
    epoch: int | None = None
    offsets: Offsets = field(default_factory=dict)
    held_by_epoch: int | None = None
    """For a fenced driver: the epoch holding the pipeline (the operator starts above)."""
    offsets_omitted: bool = False
    """The offsets did not fit in :data:`LIMIT` bytes and were left out."""

    def to_json(self) -> str:
        document: dict[str, Any] = {
            "exitCode": int(self.exit_code),
            "reason": self.reason,
            "message": self.message[:MESSAGE_LIMIT],
            "lastBatchId": self.last_batch_id,
            "epoch": self.epoch,
            "offsets": {topic: dict(parts) for topic, parts in self.offsets.items()},
        }
        if self.held_by_epoch is not None:
            document["heldByEpoch"] = self.held_by_epoch
        text = json.dumps(document)
        if len(text.encode()) > LIMIT:
            document["offsets"] = None
            document["offsetsOmitted"] = True
            text = json.dumps(document)
        return text


def parse(text: str) -> Termination | None:
    """The message a driver wrote, or ``None`` if ``text`` is not one."""
    try:
        document = json.loads(text)
        return Termination(
            exit_code=ExitCode(int(document["exitCode"])),
            reason=str(document["reason"]),
            message=str(document.get("message") or ""),
            last_batch_id=_optional_int(document.get("lastBatchId")),
            epoch=_optional_int(document.get("epoch")),
            offsets={
                str(topic): {str(p): int(o) for p, o in parts.items()}
                for topic, parts in (document.get("offsets") or {}).items()
            },
            held_by_epoch=_optional_int(document.get("heldByEpoch")),
            offsets_omitted=bool(document.get("offsetsOmitted", False)),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def _optional_int(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"not an integer: {value!r}")
    return int(value)


def write(path: Path, termination: Termination) -> None:
    """Write the message; outside Kubernetes there may be no termination log (the
    driver's last log line says the same)."""
    with contextlib.suppress(OSError):
        path.write_text(termination.to_json())
