"""The termination message: a small JSON document Kubernetes shows in the pod's
container status (``terminationMessagePath``), which the operator reads to learn why
a driver stopped and where it left off."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice_job import offsets
from sluice_job.exitcodes import ExitCode
from sluice_job.offsets import TopicPartition

LIMIT = 4096  # bytes Kubernetes keeps of a termination message


@dataclass(frozen=True)
class Termination:
    exit_code: ExitCode
    reason: str
    message: str = ""
    last_batch_id: int | None = None
    epoch: int | None = None
    positions: dict[TopicPartition, int] = field(default_factory=dict)
    held_by_epoch: int | None = None
    """For a fenced driver: the epoch holding the pipeline (the operator starts above)."""

    def to_json(self) -> str:
        document: dict[str, Any] = {
            "exitCode": int(self.exit_code),
            "reason": self.reason,
            "message": self.message[:1000],
            "lastBatchId": self.last_batch_id,
            "epoch": self.epoch,
            "offsets": offsets.to_json(self.positions),
        }
        if self.held_by_epoch is not None:
            document["heldByEpoch"] = self.held_by_epoch
        text = json.dumps(document)
        if len(text.encode()) > LIMIT:
            document["offsets"] = None
            document["offsetsOmitted"] = True
            text = json.dumps(document)
        return text


def write(path: Path, termination: Termination) -> None:
    # Outside Kubernetes there may be no termination log; the log line says the same.
    with contextlib.suppress(OSError):
        path.write_text(termination.to_json())
