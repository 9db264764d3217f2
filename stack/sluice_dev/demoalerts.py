"""``make demo-alerts``: the demo watched by the stack's Prometheus and Alertmanager, so
that the alerts Sluice ships are seen firing, and resolving, on the demo's own faults.

What it adds to the demo: the stack's monitoring (``sluice-dev up monitoring``: the
Prometheus Operator, Prometheus, Alertmanager); from the chart (``helm template``,
never a copy) its PodMonitor for the demo's drivers and its PrometheusRule; and,
since the demo's operator is a process of the stack rather than a pod a ServiceMonitor
could find, a ScrapeConfig naming it to Prometheus under the job the rules read
(``sluice-operator``). A watch (:mod:`sluice_dev.monitoring.alertwatch`) follows every
alert while the demo runs, and each fault is told as a timeline: the node failure
(``SluiceDriverFenced``) and a Cassandra outage with events still arriving
(``SluiceDependencyUnavailable``, ``SluicePipelineNotCommitting``, both resolved once
Cassandra is back). Any other alert in Alertmanager is a false positive: the demo
reports it and fails. At the end every query of the chart's dashboard is asked for
the demo's pipeline over the run (a panel with no data fails the demo too), and its
key panels are printed and drawn (:mod:`sluice_dev.dashboard`).

The timelines and the checks are pure (:func:`timeline`, :func:`unexpected`); the rest
is I/O.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from sluice_dev import localcluster, stack
from sluice_dev.dashboard import fetch, plot, summary
from sluice_dev.kubectl import Kubectl
from sluice_dev.monitoring import client, rules
from sluice_dev.monitoring.alertwatch import AlertWatch, watching
from sluice_dev.monitoring.timeline import Episode, Key
from sluice_dev.paths import Layout
from sluice_dev.servers import alertmanager, prometheus

Say = Callable[[str], None]

INTERVAL: Final = "5s"
"""The drivers' and the operator's scrape interval (the stack evaluates every 5 s)."""
OPERATOR_JOB: Final = "sluice-operator"
"""The job label the chart's ServiceMonitor gives an operator pod: the rules read the
operator's series under it (``SluiceOperatorDown`` fires without it)."""
LOADED_TIMEOUT: Final = 180.0
"""Seconds for the Prometheus Operator to turn the chart's objects into Prometheus's
configuration, the reloader to load it and the first scrape of the operator."""
MONITORS: Final = ("PodMonitor", "PrometheusRule")

FENCED: Final = "SluiceDriverFenced"
UNAVAILABLE: Final = "SluiceDependencyUnavailable"
NOT_COMMITTING: Final = "SluicePipelineNotCommitting"


def chart_values(namespace: str) -> tuple[str, ...]:
    """The chart's driver PodMonitor (scraping ``namespace`` every ``INTERVAL``) and
    its PrometheusRule on."""
    return (
        f"watchNamespaces={{{namespace}}}",
        "metrics.podMonitor.enabled=true",
        f"metrics.podMonitor.interval={INTERVAL}",
        "prometheusRule.enabled=true",
    )


def operator_scrape(namespace: str, port: int) -> dict[str, Any]:
    """A ScrapeConfig for the demo's operator, a process of the stack serving
    ``/metrics`` on ``127.0.0.1:port`` (in the stack's network namespace, where
    Prometheus runs too), under the chart's operator job."""
    return {
        "apiVersion": "monitoring.coreos.com/v1alpha1",
        "kind": "ScrapeConfig",
        "metadata": {
            "name": "demo-operator",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "sluice-dev"},
        },
        "spec": {
            "jobName": OPERATOR_JOB,
            "scrapeInterval": INTERVAL,
            "metricsPath": "/metrics",
            "staticConfigs": [{"targets": [f"127.0.0.1:{port}"]}],
        },
    }


def install(
    layout: Layout, kubectl: Kubectl, *, namespace: str, operator_port: int, say: Say
) -> None:
    """The monitoring servers up, the chart's monitors and rules and the operator's
    ScrapeConfig applied; returns once Prometheus scrapes the operator and holds the
    shipped rules."""
    stack.up(layout, ["monitoring"], say=lambda line: say(f"    {line}"))
    chart = localcluster.render_chart(layout, *chart_values(namespace), namespace=namespace)
    for doc in (d for d in chart if d["kind"] in MONITORS):
        kubectl.apply(doc)
    kubectl.apply(operator_scrape(namespace, operator_port))
    deadline = time.monotonic() + LOADED_TIMEOUT
    while problem := _not_loaded():
        if time.monotonic() > deadline:
            raise stack.StackError(f"monitoring not ready after {LOADED_TIMEOUT:.0f}s: {problem}")
        time.sleep(1.0)


def _not_loaded() -> str | None:
    """Why Prometheus is not ready for the demo yet, or None."""
    try:
        loaded = client.alert_rule_names(prometheus.URL)
        up = client.query(prometheus.URL, f'up{{job="{OPERATOR_JOB}"}} == 1')
    except client.ApiError as err:
        return str(err)
    if missing := sorted(set(rules.rules()) - loaded):
        return f"rules not loaded yet: {', '.join(missing)}"
    return None if up else f"the operator (job {OPERATOR_JOB}) not scraped yet"


# -- what the demo tells ---------------------------------------------------------------


@dataclass
class Fault:
    """One fault of the demo and what followed it, in Unix times."""

    what: str
    at: float
    steps: list[tuple[float, str]] = field(default_factory=list)
    """What else happened (a driver running again, the cause removed)."""
    alerts: list[Episode] = field(default_factory=list)


def timeline(fault: Fault) -> list[str]:
    """The fault's moments, in order, each in seconds after it: the fault, its steps,
    and each alert pending in Prometheus (if it was before it fired), firing, listed by
    Alertmanager, resolved and gone (a pure function)."""
    moments = [(fault.at, fault.what), *fault.steps]
    for episode in fault.alerts:
        name = episode.key[0]
        wait = rules.for_seconds(name)
        pending = episode.pending_at
        if pending is not None and episode.starts_at is not None and pending >= episode.starts_at:
            pending = None  # first listed already firing (no for:): never pending
        moments += [
            (t, f"{name} {text}")
            for t, text in (
                (pending, "pending in Prometheus"),
                (episode.starts_at, f"firing (its for: {wait:.0f} s over)"),
                (episode.firing_at, "listed by Alertmanager's /api/v2/alerts"),
                (episode.ends_at, "resolved by Prometheus"),
                (episode.resolved_at, "gone from Alertmanager"),
            )
            if t is not None
        ]
    return [f"  +{t - fault.at:6.1f} s  {text}" for t, text in sorted(moments)]


def unexpected(episodes: Iterable[Episode], expected: Iterable[Key]) -> list[Episode]:
    """The alerts that reached Alertmanager but are none of those ``expected``: a
    false positive of the demo (a pure function)."""
    wanted = set(expected)
    return [e for e in episodes if e.firing_at is not None and e.key not in wanted]


@dataclass
class Alerting:
    """The demo's alert watch: its faults, the alerts each should fire, the rest."""

    watch: AlertWatch
    pipeline: str
    """The pipeline label of the demo's series, ``namespace/name``."""
    say: Say
    faults: list[Fault] = field(default_factory=list)
    expected: set[Key] = field(default_factory=set)
    begun: float = field(default_factory=time.time)
    problems: list[str] = field(default_factory=list)

    def fault(self, what: str, at: float | None = None) -> Fault:
        found = Fault(what, time.time() if at is None else at)
        self.faults.append(found)
        return found

    def fired(self, fault: Fault, alert: str, timeout: float, dependency: str = "") -> None:
        """Until ``alert`` of the pipeline reaches Alertmanager after ``fault``."""
        self.expected.add((alert, self.pipeline, dependency))
        try:
            episode = self.watch.firing(alert, self.pipeline, after=fault.at, timeout=timeout)
        except TimeoutError as err:
            self.problems.append(f"after {fault.what}: {err}")
            return
        fault.alerts.append(episode)
        seen = (episode.starts_at or episode.firing_at or fault.at) - fault.at
        self.say(f"    {alert} firing {seen:.1f}s after: {fault.what}")

    def resolved(self, fault: Fault, timeout: float) -> None:
        """Until every alert of ``fault`` has left Alertmanager."""
        for episode in fault.alerts:
            try:
                self.watch.resolved(episode, timeout=timeout)
            except TimeoutError as err:
                self.problems.append(f"after {fault.what}: {err}")
                continue
            end = (episode.ends_at or episode.resolved_at or fault.at) - fault.at
            self.say(f"    {episode.key[0]} resolved {end:.1f}s after: {fault.what}")

    def dashboard(self, png: Path) -> list[str]:
        """Every query of the chart's dashboard asked for the demo's pipeline over the
        run: its key panels as text (and ``png``); a panel with no data is a problem."""
        answers = fetch.every_query_since(prometheus.URL, self.pipeline, self.begun)
        written = plot.write_png([a for a in answers if a.query.key], png, self.pipeline)
        self.problems += [
            f"dashboard panel {a.query.panel!r} has no data: {a.promql}"
            for a in summary.missing(answers)
        ]
        found = len(answers) - len(summary.missing(answers))
        return [
            "",
            f"The dashboard (charts/sluice/files/dashboard.json): {found} of {len(answers)} "
            f"queries answered with data; the key panels, also in {written}:",
            summary.render([a for a in answers if a.query.key]),
        ]

    def report(self) -> list[str]:
        lines = ["", "Alerts (Prometheus every 5 s, Alertmanager's API read every second):"]
        for fault in self.faults:
            lines += [f"{fault.what}:", *timeline(fault)]
        false = unexpected(self.watch.episodes(), self.expected)
        self.problems += [f"an alert the demo's faults do not explain: {e}" for e in false]
        lines.append(f"alerts with no fault to explain them: {len(false)}")
        return lines + [f"PROBLEM: {p}" for p in self.problems]


@contextmanager
def watched(pipeline: str, say: Say) -> Iterator[Alerting]:
    with watching(prometheus.URL, alertmanager.URL) as watch:
        yield Alerting(watch, pipeline, say)
