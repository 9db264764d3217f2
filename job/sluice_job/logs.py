"""Structured logging: one JSON object per line on stderr, so a batch's figures
(ids, ranges, counts, phase durations) can be read by machines as well as people.
Credentials never reach a log line: nothing here formats configuration."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

LOGGER = logging.getLogger("sluice_job")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def setup(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    LOGGER.handlers[:] = [handler]
    LOGGER.setLevel(level)
    LOGGER.propagate = False


def event(
    name: str, level: int = logging.INFO, exc_info: BaseException | None = None, **fields: Any
) -> None:
    LOGGER.log(level, name, exc_info=exc_info, extra={"fields": fields})
