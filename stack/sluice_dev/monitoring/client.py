"""Reads of Prometheus's and Alertmanager's HTTP APIs: what a person (or a test)
checks of the stack's monitoring. Each returns the API's ``data`` as parsed JSON;
:class:`ApiError` carries the server's own words."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any


class ApiError(RuntimeError):
    """Prometheus or Alertmanager answered with an error, or not at all."""


def get(url: str, path: str, params: Mapping[str, str] | None = None) -> Any:
    """``GET url+path?params``: the answer's ``data`` (Prometheus's envelope) or the
    whole answer (Alertmanager's API has none)."""
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    try:
        with urllib.request.urlopen(f"{url}{path}{query}", timeout=10) as answer:
            body = json.loads(answer.read())
    except urllib.error.HTTPError as err:
        raise ApiError(f"{path}: {err.code} {err.read()[-500:].decode(errors='replace')}") from err
    except (OSError, urllib.error.URLError, ValueError) as err:
        raise ApiError(f"{url}{path}: {err}") from err
    if isinstance(body, dict) and "status" in body and "data" in body:
        if body["status"] != "success":
            raise ApiError(f"{path}: {body.get('error', body)}")
        return body["data"]
    return body


def active_targets(url: str) -> list[dict[str, Any]]:
    """Prometheus's scrape targets: each with ``labels``, ``health``, ``lastError``."""
    targets: list[dict[str, Any]] = get(url, "/api/v1/targets", {"state": "active"})[
        "activeTargets"
    ]
    return targets


def rule_groups(url: str) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = get(url, "/api/v1/rules")["groups"]
    return groups


def alert_rule_names(url: str) -> set[str]:
    """The names of every alerting rule Prometheus has loaded."""
    return {
        rule["name"]
        for group in rule_groups(url)
        for rule in group.get("rules", [])
        if rule.get("type") == "alerting"
    }


def alertmanagers(url: str) -> list[str]:
    """The URLs of the Alertmanagers Prometheus sends alerts to."""
    found = get(url, "/api/v1/alertmanagers")["activeAlertmanagers"]
    return [str(item["url"]) for item in found]


def query(url: str, promql: str) -> list[dict[str, Any]]:
    """An instant query's result (a vector: ``metric`` labels and ``value``)."""
    result: list[dict[str, Any]] = get(url, "/api/v1/query", {"query": promql})["result"]
    return result


def alerts(alertmanager_url: str) -> list[dict[str, Any]]:
    """Alertmanager's alerts (``/api/v2/alerts``): ``labels``, ``status``, ``startsAt``."""
    found: list[dict[str, Any]] = get(alertmanager_url, "/api/v2/alerts")
    return found


def query_range(
    url: str, promql: str, start: float, end: float, step: float
) -> list[dict[str, Any]]:
    """A range query's result (a matrix: ``metric`` labels and ``values``, each
    ``[unix time, "value"]``), as a dashboard panel asks for it."""
    params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
    result: list[dict[str, Any]] = get(url, "/api/v1/query_range", params)["result"]
    return result
