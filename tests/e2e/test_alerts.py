"""Every shipped alert, live: real faults on real drivers, each alert waited for in
Alertmanager's API with the labels its runbook names, then the cause removed and the
alert waited for until it leaves (``make test-monitoring``; ``make test`` leaves it
out).

The chart is installed with its PodMonitor, ServiceMonitor and PrometheusRule on
(``tests.support.monitored_fleet``): its operator pod serves a namespace of e2e
pipelines whose drivers run the e2e job images on private node-agent nodes, and the
stack's Prometheus (scrape and evaluation every 5 s) evaluates the shipped rules
unchanged, with their real ``for:`` durations and windows. The slow faults run side
by side, one pipeline each, rather than with shortened rules:

* ``clean``: a clean run with a warm-handover upgrade v1 → v2: no alert is even
  pending for it (no false positives); the dashboard's every query returns data for
  it. Then it is the pipeline of the Cassandra outage;
* ``loop``: the ``:broken`` image, whose transform raises: ``SluiceDriverRestartLoop``
  at the third failure, ``SluicePipelineFailed`` at the fourth (``maxFailures: 4``),
  the fixed image v1 resolves Failed (the restart loop's 30 m window outlasts it);
* ``fence``: its driver's node partitioned: ``SluiceDriverFenced`` (NodeLost), which
  its 15 m window resolves;
* ``stuck``: an upgrade to an image that cannot be pulled, with a start deadline
  longer than the rule's 10 m: ``SluiceUpgradeStuck``; v2 resolves it;
* ``lag``: 25 records per partition every 10 s against 40 events/s:
  ``SluicePipelineLagGrowing`` after its 15 m window and 15 m ``for:``; the cap raised
  and production stopped resolve it;
* Cassandra stopped (once ``clean``, ``loop`` and ``fence`` are past their faults):
  ``SluicePipelineNotCommitting`` and ``SluiceDependencyUnavailable`` for ``clean``
  (and for every other Kafka pipeline running then: the outage is the stack's);
* ``aging``: a Pub/Sub pipeline (the KPI example's transform) whose sink keyspace is
  given more replicas than the one node has: its batch waits for Cassandra holding
  its messages, ``SluicePubSubMessagesAging`` when the oldest is 10 m old and 10 m
  later; the replication set back resolves it;
* the chart's operator scaled to 0, last (a restarted operator cannot start a new
  driver for an existing pipeline under the chart's RBAC: docs/alerts.md):
  ``SluiceOperatorDown``; scaled back to 1, it resolves.

Each alert's figures (fault → in Alertmanager against the rule's promise, cause
removed → gone) are printed as a table (pytest -s) and written as JSON
(``SLUICE_ALERT_FIGURES``, default the test's tmp directory). The restart loop's
resolution (30 m after its third failure) is waited for only when it falls within
``SLUICE_ALERT_LATE_SECONDS`` (default 600) of the other scenarios' end.
``SluiceDriverDown`` fires in ``tests/integration/test_monitoring_tenancy.py`` (a
driver over the scrape's sample limit).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from cassandra import InvalidRequest

from sluice_dev import stack as local_stack
from sluice_dev.dashboard import fetch, plot, summary
from sluice_dev.events import EventFactory
from sluice_dev.monitoring import client
from sluice_dev.monitoring import rules as alert_rules
from sluice_dev.monitoring.alertwatch import AlertWatch, watching
from sluice_dev.monitoring.timeline import Episode
from sluice_dev.nodeagent import control
from sluice_dev.paths import Layout
from sluice_dev.servers import alertmanager, kube, prometheus
from tests.support import state
from tests.support.alert_figures import DELIVERY_SECONDS
from tests.support.alert_run import Run, scenario, until
from tests.support.e2e import JOB_IMAGE
from tests.support.monitored_fleet import Fleet, Member, fleet
from tests.support.pubsub import Publishing, PubSub

pytestmark = [pytest.mark.e2e, pytest.mark.monitoring, pytest.mark.timeout(3600)]

START = 600.0
"""Seconds a driver may take from its pipeline's creation to Running on the loaded
2-core machine (several Spark drivers start at once)."""
NODE_GRACE = alert_rules.seconds(kube.NODE_MONITOR_GRACE)
NODE_LOST = 5.0
"""``failover.nodeLostSeconds`` of the e2e manifest."""


@pytest.fixture
def watch(monitoring: Layout) -> Iterator[AlertWatch]:
    with watching(prometheus.URL, alertmanager.URL) as watched:
        yield watched


@pytest.fixture
def pipelines(
    monitoring: Layout,
    helm_binary: Path,
    sluice_crd: str,
    core: Any,
    custom: Any,
    kafka_bootstrap: str,
    kafka_topic: Callable[..., str],
    cassandra: Any,
    cassandra_contact: str,
    job_image_env: dict[str, str],
    tmp_path: Path,
) -> Iterator[Fleet]:
    with fleet(
        monitoring,
        helm_binary=helm_binary,
        core=core,
        custom=custom,
        bootstrap=kafka_bootstrap,
        contact=cassandra_contact,
        cassandra=cassandra,
        make_topic=kafka_topic,
        job_image_env=job_image_env,
        workdir=tmp_path,
        pools={"main": 2, "fence": 2},
    ) as made:
        yield made


# -- what the scenarios wait on ------------------------------------------------------


def running(member: Member, epoch: int | None = None, timeout: float = START) -> float:
    """Until the pipeline is Running (at ``epoch``); the Unix time it was seen so."""
    member.pipeline.wait_phase("Running", epoch=epoch, timeout=timeout)
    return time.time()


def committed_by(run: Run, member: Member, epoch: int, timeout: float) -> None:
    key = member.pipeline.checkpoint_key

    def done() -> bool:
        try:
            rows = state.history(run.fleet.cassandra, member.keyspace, key)
        except InvalidRequest:
            return False  # the driver has not created its tables yet
        return any(r.epoch == epoch for r in rows)

    until(done, timeout=timeout, what=f"{member.name}: a commit by epoch {epoch}")


def firing_for(run: Run, member: Member, since: float) -> list[Any]:
    """``member``'s alerts that reached Alertmanager since ``since``."""
    seen = run.watch.timeline.touching(member.key, since, time.time())
    return [e for e in seen if e.firing_at is not None]


def quiet(run: Run, member: Member, since: float, seconds: float) -> None:
    """Watch ``member`` run on for ``seconds``, or until one of its alerts reaches
    Alertmanager (a false positive, which the scenario then reports)."""
    end = time.time() + seconds
    while time.time() < end and not firing_for(run, member, since):
        time.sleep(1.0)


# -- the scenarios -------------------------------------------------------------------


def clean(run: Run) -> None:
    member = run.fleet.add("clean", "main", upgrade={"mode": "WarmHandover"})
    run.members["clean"] = member
    begun = time.time()
    member.produce(50, seed=71)
    running(member, epoch=1)
    committed_by(run, member, 1, START)
    run.say("clean: v1 running and committing; warm handover to v2")
    member.pipeline.patch_spec({"image": f"{JOB_IMAGE}:v2"})
    running(member, epoch=2)
    committed_by(run, member, 2, START)
    run.say("clean: v2 took over")
    quiet(run, member, begun, 60)
    dashboard(run, member, begun)
    end = time.time()
    run.notes["clean_window_seconds"] = end - begun
    if fired := firing_for(run, member, begun):
        run.problem(f"clean run with a warm handover: alerts in Alertmanager: {fired}")
    pending = run.watch.timeline.touching(member.key, begun, end)
    run.notes["clean_pending"] = [str(e) for e in pending]
    run.say(f"clean: no alert firing over {end - begun:.0f} s; pending meanwhile: {pending}")


def dashboard(run: Run, member: Member, begun: float) -> None:
    """Every query of the chart's dashboard, for the clean pipeline, over its run."""
    answers = fetch.every_query_since(prometheus.URL, member.key, begun)
    print(summary.render(answers), flush=True)
    png = plot.write_png([a for a in answers if a.query.key], run.workdir / "dashboard.png")
    run.say(f"dashboard: key panels written to {png}")
    run.notes["dashboard"] = {a.promql: len(a.series) for a in answers}
    for what in ("scrape_duration_seconds", "scrape_samples_post_metric_relabeling"):
        for row in client.query(prometheus.URL, f'{what}{{job="sluice-driver"}}'):
            line = f"{what} {row['metric'].get('pipeline')} {row['metric'].get('pod')}"
            run.say(f"{line}: {row['value'][1]}")
            run.notes.setdefault("scrapes", []).append(f"{line}: {row['value'][1]}")
    for answer in summary.missing(answers):
        run.problem(f"dashboard panel {answer.query.panel!r}: no data for {answer.promql}")


def outage(run: Run) -> None:
    """Cassandra stopped under every Kafka pipeline running, ``clean`` the one waited on."""
    run.after("clean done", "loop failed", "fence over", timeout=1800)
    member = run.members["clean"]
    not_committing = run.expect(
        "SluicePipelineNotCommitting",
        member,
        "Cassandra stopped",
        onset=60 + 1,
        onset_text="10 trigger intervals (min. 60 s) since the last commit",
    )
    unavailable = run.expect(
        "SluiceDependencyUnavailable",
        member,
        "Cassandra stopped",
        onset=30,
        onset_text="the driver's first failed attempt (≤ 30 s)",
    )
    local_stack.stop(run.layout, "cassandra")
    run.say("outage: Cassandra stopped")
    episodes: list[Episode | None] = []
    try:
        for figure in (unavailable, not_committing):
            try:
                episodes.append(run.fired(figure, timeout=figure.promise + 180))
            except TimeoutError as err:
                run.problem(f"outage: {err}")
                episodes.append(None)
    finally:
        started = time.time()
        local_stack.up(run.layout, ["cassandra"], say=lambda _line: None)
    healthy = time.time() - started
    run.notes["cassandra_start_seconds"] = healthy
    run.say(f"outage: Cassandra started again, healthy after {healthy:.0f} s")
    if episodes[0] is not None and episodes[0].labels.get("dependency") != "cassandra":
        run.problem(f"SluiceDependencyUnavailable without dependency=cassandra: {episodes[0]}")
    waiting = [(f, e) for f, e in zip((unavailable, not_committing), episodes, strict=True) if e]
    for figure, _episode in waiting:
        run.cure(figure, "Cassandra started", at=started)
        figure.resolve_promise = healthy + 5 + 20 + DELIVERY_SECONDS
        figure.resolve_text = "Cassandra healthy + retry ≤ 5 s + a batch ≤ 20 s + 10 s"
    try:
        for figure, episode in waiting:
            run.watch.resolved(
                episode, timeout=started + 60 + (figure.resolve_promise or 0) - time.time()
            )
    except TimeoutError:
        restart_driver(run, member)
    for figure, episode in waiting:
        run.gone(figure, episode, timeout=600)
    run.notes["outage_alerts"] = [
        e.key
        for e in run.watch.episodes()
        if e.firing_at and e.firing_at >= not_committing.fault_at
    ]


def restart_driver(run: Run, member: Member) -> None:
    """The runbook's act for a driver that does not resume (SluicePipelineNotCommitting:
    "a hung driver can be restarted safely"): delete its pod; the next epoch resumes."""
    pod = str(member.pipeline.status().get("driverPod"))
    run.problem(
        f"outage: {member.key}'s driver {pod} did not resume a minute past the promise "
        "after Cassandra was back; deleting its pod (the runbook's act)"
    )
    run.notes["driver_restarted_after_outage_at"] = time.time()
    run.fleet.core.delete_namespaced_pod(pod, member.pipeline.namespace)


def loop(run: Run) -> None:
    member = run.fleet.add(
        "loop",
        "main",
        "broken",
        restart={"maxFailures": 4, "backoffSeconds": 1, "maxBackoffSeconds": 4},
    )
    member.produce(200, count=2_000, seed=72)
    # Restarts, not failures: "failures in a row" starts again after a driver that ran
    # restart's stable time (60 s), which a broken driver starting Spark on the loaded
    # machine may outlive; the alert counts DriverFailed transitions in 30 m.
    until(
        lambda: (member.pipeline.status().get("restarts") or 0) >= 3,
        timeout=1500,
        what="loop: three driver failures",
    )
    restart_loop = run.expect(
        "SluiceDriverRestartLoop",
        member,
        "3rd driver failure (the transform raises)",
        onset=5,
        onset_text="the operator's status and counter (≤ 5 s)",
    )
    looping = run.fired(restart_loop, timeout=600)
    until(
        lambda: member.pipeline.status().get("phase") == "Failed",
        timeout=900,
        what="loop: phase Failed",
    )
    failed = run.expect(
        "SluicePipelineFailed",
        member,
        "4th failure: phase Failed",
        onset=5,
        onset_text="seen ≤ 1 s late, then the operator's gauge",
    )
    failing = run.fired(failed, timeout=300)
    run.reach("loop failed")
    member.pipeline.patch_spec({"image": f"{JOB_IMAGE}:v1"})
    for figure in (restart_loop, failed):
        run.cure(figure, "image v1 (a transform that works)")
    failed.resolve_promise, failed.resolve_text = 5 + DELIVERY_SECONDS, "the next reconcile + 10 s"
    run.gone(failed, failing, timeout=600)
    restart_loop.resolve_text = "its 30 m window passes the 3rd failure"
    deadline = restart_loop.fault_at + 1800 + DELIVERY_SECONDS
    restart_loop.resolve_promise = deadline - (restart_loop.cured_at or 0)
    run.resolve_later(restart_loop, looping, deadline)
    running(member)
    run.fleet.remove(member)


def fence(run: Run) -> None:
    member = run.fleet.add("fence", "fence")
    member.produce(30, seed=73)
    running(member, epoch=1)
    committed_by(run, member, 1, START)
    [pod] = [p for p in member.pipeline.live_pods() if p.status.phase == "Running"]
    lost = next(a for a in run.fleet.pools["fence"] if a.node == pod.spec.node_name)
    fenced = run.expect(
        "SluiceDriverFenced",
        member,
        "its driver's node partitioned",
        onset=NODE_GRACE + NODE_LOST + 5,
        onset_text=f"node grace {NODE_GRACE:.0f} s + nodeLostSeconds {NODE_LOST:.0f} s + 5 s",
    )
    control.partition(run.layout, lost.node, port=lost.port)
    episode = run.fired(fenced, timeout=600)
    running(member, epoch=2)
    control.heal(run.layout, lost.node, port=lost.port)
    run.cure(fenced, "the partition healed")
    run.reach("fence over")
    activated = episode.pending_at or episode.firing_at or fenced.fault_at
    deadline = activated + 900 + DELIVERY_SECONDS
    fenced.resolve_promise = deadline - (fenced.cured_at or 0)
    fenced.resolve_text = "its 15 m window passes the NodeLost transition"
    run.resolve_later(fenced, episode, deadline)
    run.fleet.remove(member)


def stuck(run: Run) -> None:
    member = run.fleet.add("stuck", "main", restart={"startDeadlineSeconds": 1800})
    member.produce(20, seed=74)
    running(member, epoch=1)
    committed_by(run, member, 1, START)
    upgrade = run.expect(
        "SluiceUpgradeStuck",
        member,
        "upgrade to an image that cannot be pulled",
        onset=5,
        onset_text="phase Upgrading at the spec change (≤ 5 s)",
    )
    member.pipeline.patch_spec({"image": f"{JOB_IMAGE}:missing"})
    episode = run.fired(upgrade, timeout=1200)
    run.cure(upgrade, "image v2")
    member.pipeline.patch_spec({"image": f"{JOB_IMAGE}:v2"})
    ran = running(member)
    upgrade.resolve_promise = ran - (upgrade.cured_at or 0) + DELIVERY_SECONDS
    upgrade.resolve_text = "v2 Running + 10 s"
    run.gone(upgrade, episode, timeout=900)
    run.fleet.remove(member)


def lag(run: Run) -> None:
    member = run.fleet.add(
        "lag",
        "main",
        source={"kafka": {"maxRecordsPerPartition": 25}},
        trigger={"intervalSeconds": 10},
    )
    growing = run.expect(
        "SluicePipelineLagGrowing",
        member,
        "40 events/s into a pipeline capped at 10/s",
        onset=0,
        onset_text="",
    )
    member.produce(40, seed=75)
    running(member)
    first = until(
        lambda: client.query(prometheus.URL, f'sluice_consumer_lag{{pipeline="{member.key}"}}'),
        timeout=START,
        what="lag: the driver's first lag in Prometheus",
    )
    onset = time.time() - growing.fault_at + 60 + 60
    run.notes["lag_first_sample_after"] = onset - 120
    growing.promise = onset + alert_rules.for_seconds(growing.alert) + DELIVERY_SECONDS
    growing.promise_text = (
        f"the driver's first lag ({len(first)} partitions) + two 1 m points of the 15 m "
        "window (≤ 2 min) + for 15 min + 10 s"
    )
    episode = run.fired(growing, timeout=growing.promise + 600)
    run.cure(growing, "cap 20,000/partition, trigger 1 s, production stopped")
    member.stop_producing()
    member.pipeline.patch_spec(
        {"source": {"kafka": {"maxRecordsPerPartition": 20_000}}, "trigger": {"intervalSeconds": 1}}
    )
    growing.resolve_text = (
        "the new driver drains the backlog (lag 0), the old pod's last lag ages out (2 m), 10 s"
    )
    run.gone(growing, episode, timeout=1200)


def aging(run: Run) -> None:
    """A Pub/Sub pipeline whose sink's replicas are away: its keyspace's replication
    raised to 3 on the one-node cluster, so the sink's LOCAL_QUORUM writes are refused
    ``Unavailable`` as when two of three replicas are down (this pipeline's sink only;
    its checkpoint keyspace and every other pipeline are untouched). Its batch waits
    for Cassandra holding its messages, their leases renewed, until the oldest is
    10 minutes old, and 10 minutes more."""
    assert run.pubsub is not None, "the aging scenario needs the test's Pub/Sub project"
    member = run.fleet.add_pubsub("aging", "main", run.pubsub)
    member.publishing = Publishing(run.pubsub, member.topic, EventFactory(seed=76), rate=5)
    running(member, epoch=1)
    committed_by(run, member, 1, START)
    sink = member.sink_keyspace
    aging = run.expect(
        "SluicePubSubMessagesAging",
        member,
        "its sink's keyspace needs 3 replicas of the 1 node (writes Unavailable)",
        onset=600 + 5,
        onset_text="its held batch's oldest message 10 min old (published ≤ 5 s after the fault)",
    )
    replication(run, sink, 3)
    run.say(f"aging: {sink} needs 3 replicas; the pipeline's writes are refused")
    try:
        episode = run.fired(aging, timeout=aging.promise + 300)
    finally:
        replication(run, sink, 1)
        run.cure(aging, "the keyspace's replication back to 1")
    # Messages published in the outage's first 10 minutes are still over 10 minutes
    # old when their batch is taken: about 3 batches of 1,000 at 5 a second.
    aging.resolve_promise = 5 + 40 + DELIVERY_SECONDS
    aging.resolve_text = (
        "the driver's next attempt ≤ 5 s + the batches of messages over 10 m old ≤ 40 s + 10 s"
    )
    run.gone(aging, episode, timeout=600)
    run.fleet.remove(member)


def replication(run: Run, keyspace: str | None, factor: int) -> None:
    run.fleet.cassandra.execute(
        f"ALTER KEYSPACE {keyspace} WITH replication = "
        f"{{'class': 'SimpleStrategy', 'replication_factor': {factor}}}",
        timeout=60,
    )


def operator_down(run: Run) -> None:
    # Last: a restarted operator cannot start a new driver for an existing pipeline
    # under the chart's RBAC (no get on serviceaccounts: see docs/alerts.md).
    run.after("outage done", "stuck done", "loop done", "lag done", "aging done", timeout=2700)
    run.milestone("operator up").clear()
    asked = time.time()
    run.fleet.scale_operator(0)
    run.notes["operator_termination_seconds"] = time.time() - asked
    run.say(f"operator: scaled to 0, its pod gone after {time.time() - asked:.0f} s")
    down = run.expect(
        "SluiceOperatorDown",
        None,
        "the chart's operator scaled to 0, its pod gone",
        onset=5,
        onset_text="its target gone (≤ 5 s)",
    )
    episode = run.fired(down, timeout=900)
    run.cure(down, "scaled back to 1")
    run.fleet.scale_operator(1)
    back = time.time()
    down.resolve_promise = back - (down.cured_at or 0) + 10 + 5 + DELIVERY_SECONDS
    down.resolve_text = (
        "its pod running + the operator serving (≤ 10 s) + its EndpointSlice (≤ 5 s) + 10 s"
    )
    run.notes["operator_back_running_after"] = back - (down.cured_at or 0)
    run.gone(down, episode, timeout=600)


PLAN: list[tuple[str, Callable[[Run], None], tuple[str, ...], frozenset[str]]] = [
    ("clean", clean, ("clean done",), frozenset()),
    (
        "loop",
        loop,
        ("loop failed", "loop done"),
        frozenset({"SluiceDriverRestartLoop", "SluicePipelineFailed"}),
    ),
    ("fence", fence, ("fence over",), frozenset({"SluiceDriverFenced"})),
    ("stuck", stuck, ("stuck done",), frozenset({"SluiceUpgradeStuck"})),
    ("lag", lag, ("lag done",), frozenset({"SluicePipelineLagGrowing"})),
    (
        "outage",
        outage,
        ("outage done",),
        frozenset({"SluicePipelineNotCommitting", "SluiceDependencyUnavailable"}),
    ),
    ("aging", aging, ("aging done",), frozenset({"SluicePubSubMessagesAging"})),
    ("operator", operator_down, ("operator up",), frozenset({"SluiceOperatorDown"})),
]
"""Each scenario: its name, body, the milestones it owns and the alerts it fires.
``SLUICE_ALERT_SCENARIOS=loop,fence`` runs some only (``outage`` needs ``clean``):
the milestones of the others count as reached."""


def test_every_shipped_alert_fires_on_its_fault_and_resolves(
    pipelines: Fleet, watch: AlertWatch, monitoring: Layout, pubsub: PubSub, tmp_path: Path
) -> None:
    pipelines.wait_monitored(prometheus.URL)
    run = Run(monitoring, pipelines, watch, tmp_path, pubsub=pubsub)
    chosen = os.environ.get("SLUICE_ALERT_SCENARIOS", "")
    plan = [p for p in PLAN if not chosen or p[0] in chosen.split(",")]
    run.milestone("operator up").set()
    for skipped, _body, owns, _alerts in PLAN:
        if all(p[0] != skipped for p in plan):
            for milestone in owns:
                run.reach(milestone)
    with ThreadPoolExecutor(max_workers=len(plan)) as pool:
        for future in [
            pool.submit(scenario, run, name, body, *owns) for name, body, owns, _ in plan
        ]:
            future.result()
    run.wait_late(float(os.environ.get("SLUICE_ALERT_LATE_SECONDS", "600")))
    out = Path(os.environ.get("SLUICE_ALERT_FIGURES", str(tmp_path / "alert-figures.json")))
    run.report(out)
    for episode in watch.episodes():
        if episode.key[1].startswith(f"{pipelines.namespace}/") or not episode.key[1]:
            print(f"seen: {episode}", flush=True)
    fired = {f.alert for f in run.figures if f.firing_at is not None}
    assert fired == set().union(*(alerts for *_, alerts in plan)), run.problems
    if not chosen:  # SluiceDriverDown: test_monitoring_tenancy
        assert fired == set(alert_rules.rules()) - {"SluiceDriverDown"}
    assert not run.problems, "\n".join(run.problems)
