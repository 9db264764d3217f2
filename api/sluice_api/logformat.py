"""One log line format for the driver and the operator: a JSON object per line.

On-call engineers read both with the same tools (``kubectl logs ... | jq``), so both
write ``ts`` (UTC, milliseconds), ``level``, ``logger``, ``event`` (the message) and
the record's structured ``fields``, plus ``error`` with the traceback of an exception.
Nothing here formats configuration, so credentials never reach a log line.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)
