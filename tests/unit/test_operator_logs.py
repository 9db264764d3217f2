"""The operator logs JSON lines in the driver's format (issue 15 item 5)."""

from __future__ import annotations

import io
import json
import logging

import pytest

from sluice_operator.cli import configure_logging

pytestmark = pytest.mark.unit


def test_the_operator_and_kopf_log_json_lines_like_the_driver() -> None:
    out = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        configure_logging(logging.INFO, out)
        logging.getLogger("kopf.objects").warning("Handler 'on_change' failed: %s", "conflict")
        logging.getLogger("sluice_operator.kube").info("debug detail", extra={"fields": {"a": 1}})
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            logging.getLogger("sluice_operator").exception("reconcile failed")
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["level"], e["logger"], e["event"]) for e in lines] == [
        ("warning", "kopf.objects", "Handler 'on_change' failed: conflict"),
        ("info", "sluice_operator.kube", "debug detail"),
        ("error", "sluice_operator", "reconcile failed"),
    ]
    assert lines[1]["a"] == 1
    assert "RuntimeError: boom" in lines[2]["error"]
    assert all(e["ts"].endswith("+00:00") for e in lines)
