"""Structured logging: one JSON object per line on stderr (``sluice_api.logformat``,
the operator's format too), so a batch's figures (ids, ranges, counts, phase
durations) can be read by machines as well as people. Credentials never reach a log
line: nothing here formats configuration."""

from __future__ import annotations

import logging
import sys
from typing import Any

from sluice_api.logformat import JsonFormatter

LOGGER = logging.getLogger("sluice_job")


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
