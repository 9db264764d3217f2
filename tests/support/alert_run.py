"""One alert test's run: scenarios (one per fault, each on pipelines of its own) run
side by side on one fleet, each recording its :class:`Figure` as its alert reaches
Alertmanager and leaves it, and ordering themselves by named milestones where a
fault touches the whole stack (Cassandra stopped, the operator down).

What a scenario cannot check on the spot (an alert that fired without its runbook's
labels, a promise broken) is kept in ``problems`` and asserted once every scenario
has ended, so one broken promise does not hide the figures of the others."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sluice_dev.monitoring import rules as alert_rules
from sluice_dev.monitoring.alertwatch import AlertWatch
from sluice_dev.monitoring.timeline import Episode
from sluice_dev.paths import Layout
from tests.support.alert_figures import Figure, seconds, table
from tests.support.monitored_fleet import Fleet, Member
from tests.support.pubsub import PubSub
from tests.support.waiting import wait_for

SEEN_LATE = 2.0
"""Seconds by which a fault the test notices by polling (a status, each second) may
precede the moment it is noticed: an episode that began that much earlier counts."""


@dataclass
class Late:
    """An alert whose resolution its rule's window decides, waited for at the end."""

    figure: Figure
    episode: Episode
    deadline: float
    """Unix time by which the window says it resolves."""


@dataclass
class Run:
    layout: Layout
    fleet: Fleet
    watch: AlertWatch
    workdir: Path
    pubsub: PubSub | None = None
    """The test's Pub/Sub project (the Pub/Sub scenario's source)."""
    started: float = field(default_factory=time.time)
    figures: list[Figure] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    late: list[Late] = field(default_factory=list)
    members: dict[str, Member] = field(default_factory=dict)
    milestones: dict[str, threading.Event] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def say(self, text: str) -> None:
        print(f"[{seconds(time.time() - self.started):>10}] {text}", flush=True)

    def problem(self, text: str) -> None:
        with self._lock:
            self.problems.append(text)
        self.say(f"PROBLEM: {text}")

    # -- milestones ---------------------------------------------------------------

    def milestone(self, name: str) -> threading.Event:
        with self._lock:
            return self.milestones.setdefault(name, threading.Event())

    def reach(self, name: str) -> None:
        self.milestone(name).set()
        self.say(f"milestone: {name}")

    def after(self, *names: str, timeout: float) -> None:
        """Until every milestone of ``names`` is reached (scenarios reach theirs in a
        ``finally``, so a failed one does not hold the others)."""
        for name in names:
            if not self.milestone(name).wait(timeout):
                raise AssertionError(f"milestone {name!r} not reached in {timeout:.0f}s")

    # -- alerts -------------------------------------------------------------------

    def expect(
        self, alert: str, member: Member | None, fault: str, *, onset: float, onset_text: str
    ) -> Figure:
        """A figure for ``alert`` of ``member`` (none: an alert without a pipeline),
        its fault happening now; the promise is ``onset`` (the condition becoming
        true after the fault) + the rule's ``for:`` + one scrape and one evaluation."""
        wait = alert_rules.for_seconds(alert)
        figure = Figure(
            alert,
            member.key if member else "",
            fault,
            time.time(),
            onset + wait + 10.0,
            f"{onset_text} + for {seconds(wait)} + 10 s",
        )
        with self._lock:
            self.figures.append(figure)
        return figure

    def fired(self, figure: Figure, *, timeout: float) -> Episode:
        """Until the figure's alert is in Alertmanager; checks the runbook's labels."""
        episode = self.watch.firing(
            figure.alert, figure.pipeline, after=figure.fault_at - SEEN_LATE, timeout=timeout
        )
        figure.seen_at = episode.firing_at
        figure.firing_at = episode.starts_at or episode.firing_at
        self.say(
            f"{figure.alert} of {figure.pipeline or '-'} firing after "
            f"{seconds(figure.to_fire)} (promised ≤ {seconds(figure.promise)})"
        )
        self._check_labels(figure, episode.labels)
        if figure.to_fire is not None and figure.to_fire > figure.promise:
            self.problem(
                f"{figure.alert} of {figure.pipeline}: fired {seconds(figure.to_fire)} after "
                f"the fault, promised ≤ {seconds(figure.promise)} ({figure.promise_text})"
            )
        return episode

    def cure(self, figure: Figure, what: str, at: float | None = None) -> None:
        figure.cure, figure.cured_at = what, time.time() if at is None else at

    def gone(self, figure: Figure, episode: Episode, *, timeout: float) -> None:
        """Until the alert has left Alertmanager's active alerts."""
        self.watch.resolved(episode, timeout=timeout)
        figure.gone_seen_at = episode.resolved_at
        figure.resolved_at = episode.ends_at or episode.resolved_at
        self.say(
            f"{figure.alert} of {figure.pipeline or '-'} resolved "
            f"{seconds(figure.to_resolve)} after: {figure.cure}"
        )
        promise = figure.resolve_promise
        if promise is not None and figure.to_resolve is not None and figure.to_resolve > promise:
            self.problem(
                f"{figure.alert} of {figure.pipeline}: resolved {seconds(figure.to_resolve)} "
                f"after {figure.cure}, promised ≤ {seconds(promise)} ({figure.resolve_text})"
            )

    def resolve_later(self, figure: Figure, episode: Episode, deadline: float) -> None:
        with self._lock:
            self.late.append(Late(figure, episode, deadline))

    def _check_labels(self, figure: Figure, labels: dict[str, str]) -> None:
        want = {"severity": alert_rules.severity(figure.alert)}
        if figure.pipeline:
            want |= {"pipeline": figure.pipeline, "namespace": figure.pipeline.split("/")[0]}
        wrong = {k: labels.get(k) for k, v in want.items() if labels.get(k) != v}
        if wrong:
            self.problem(f"{figure.alert} reached Alertmanager with {wrong}, wanted {want}")

    # -- the end --------------------------------------------------------------------

    def wait_late(self, limit: float) -> None:
        """The window-bound resolutions due within ``limit`` seconds from now; the
        others are reported with the time their window promises."""
        for item in sorted(self.late, key=lambda i: i.deadline):
            remaining = item.deadline - time.time()
            if item.episode.resolved_at is None and remaining > limit:
                self.say(
                    f"{item.figure.alert} of {item.figure.pipeline}: not waited for, "
                    f"its window ends in {seconds(remaining)}"
                )
                continue
            try:
                self.gone(item.figure, item.episode, timeout=max(remaining, 0) + 60)
            except TimeoutError as err:
                self.problem(str(err))

    def report(self, path: Path) -> str:
        text = table(self.figures)
        print(f"\n{text}\n", flush=True)
        rows = [
            asdict(f) | {"to_fire": f.to_fire, "to_resolve": f.to_resolve} for f in self.figures
        ]
        path.write_text(json.dumps({"figures": rows, "notes": self.notes}, indent=2, default=str))
        print(f"figures written to {path}", flush=True)
        return text


def scenario(run: Run, name: str, body: Callable[[Run], None], *owns: str) -> None:
    """Run one scenario; reach the milestones it owns whatever happens."""
    try:
        body(run)
    except Exception as err:  # reported; the other scenarios run on
        run.problem(f"scenario {name} failed: {type(err).__name__}: {err}")
    finally:
        for milestone in owns:
            run.reach(milestone)


def until(condition: Callable[[], Any], *, timeout: float, what: str) -> Any:
    return wait_for(condition, timeout=timeout, interval=1.0, what=what)
