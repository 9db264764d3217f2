"""The operator logs JSON lines in the driver's format (issue 15 item 5)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable

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


def captured(level: int, emit: Callable[[], None]) -> list[dict[str, str]]:
    out = io.StringIO()
    root, kopf = logging.getLogger(), logging.getLogger("kopf")
    saved = (root.handlers[:], root.level, kopf.level)
    try:
        configure_logging(level, out)
        emit()
    finally:
        root.handlers[:], _, _ = saved
        root.setLevel(saved[1])
        kopf.setLevel(saved[2])
    return [json.loads(line) for line in out.getvalue().splitlines()]


def logged(level: int, emit: Callable[[], None]) -> list[tuple[str, str]]:
    return [(e["logger"], e["event"]) for e in captured(level, emit)]


def kopf_and_operator() -> None:
    logging.getLogger("kopf.objects").info("Handler 'on_pod' succeeded.")
    logging.getLogger("kopf.objects").warning("Handler 'on_change' failed: conflict")
    logging.getLogger("sluice_operator").info("created driver pod kpis-driver-2: epoch 2")


def test_kopf_chatter_is_debug_and_its_warnings_stay() -> None:
    """Every action of the operator is one line; the framework's chatter is not. With a
    thousand pipelines the log held kopf's "Handler 'on_pod' succeeded." and "Handler
    'on_pipeline' succeeded." for every pod and pipeline event, at info, burying the
    operator's own lines; at info they are gone, its warnings stay, and ``--verbose``
    (debug) shows them."""
    assert logged(logging.INFO, kopf_and_operator) == [
        ("kopf.objects", "Handler 'on_change' failed: conflict"),
        ("sluice_operator", "created driver pod kpis-driver-2: epoch 2"),
    ]
    assert ("kopf.objects", "Handler 'on_pod' succeeded.") in logged(
        logging.DEBUG, kopf_and_operator
    )


def test_a_request_kopf_retries_is_a_warning_and_one_it_gives_up_on_an_error() -> None:
    """Seen by a new user's first ``operator start``: the API server, still serving
    the CRD it was just given, answered 429 "storage is (re)initializing"; kopf retried
    and went on, but logged the retry at error level, the first line after the
    operator's start. A retry is a warning; kopf's last attempt ("escalating") stays
    an error."""

    def retries() -> None:
        api = logging.getLogger("kopf._cogs.clients.watching")
        api.error("Request attempt #1/9 failed; will retry: GET /apis/x -> 429")
        api.error("Request attempt #9/9 failed; escalating: GET /apis/x -> 429")

    levels = [(e["level"], e["event"][:22]) for e in captured(logging.INFO, retries)]
    assert levels == [("warning", "Request attempt #1/9 f"), ("error", "Request attempt #9/9 f")]
