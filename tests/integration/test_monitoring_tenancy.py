"""Tenancy in the real scrape (markers ``integration`` and ``monitoring``; not
``hostile``, so that ``make test-hostile`` needs no monitoring build):
the chart's PodMonitor, turned into Prometheus's configuration by the Prometheus
Operator, scrapes three drivers of one namespace, each a stand-in
(``tests/support/standin``) serving what a tenant's image may serve:

* ``victim``: an honest driver;
* ``impostor``: its own series, and the same names labelled with the victim's
  ``pipeline`` (epoch 999, a lag of 10⁹, Cassandra unavailable, phase Failed), which
  would fire the victim's alerts and corrupt its dashboard if they were kept;
* ``flood``: its own series and 100,000 more, over the chart's ``sampleLimit``
  (20,000).

Prometheus keeps only the victim's own series under its name, keeps the impostor's
own, has no alert pending for the victim, cuts off the flood's scrape (its target
down with Prometheus's sample-limit error, ``up`` 0) and scrapes the others as before.
The flood is flagged: ``SluiceDriverDown`` reaches Alertmanager after its 5 m
``for:``, with the flood's namespace, pipeline and pod, and leaves it once the flood
is fixed (100 series). Figures (scrape durations, samples per target, the alert's
timeline) are printed (pytest -s)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice_dev.monitoring import client
from sluice_dev.monitoring.alertwatch import watching
from sluice_dev.monitoring.rules import for_seconds
from sluice_dev.paths import Layout
from sluice_dev.servers import alertmanager, prometheus
from tests.support.alert_figures import DELIVERY_SECONDS, Figure, table
from tests.support.monitored_fleet import Release, chart_release
from tests.support.operator import Pipeline, standin_spec
from tests.support.waiting import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.monitoring,
    pytest.mark.timeout(1200),
]

FLOOD = 100_000
SAMPLE_LIMIT = 20_000
"""The chart's ``metrics.podMonitor.limits.sampleLimit`` default."""


@pytest.fixture
def release(
    monitoring: Layout,
    helm_binary: Path,
    sluice_crd: str,
    standin_image: str,
    core: Any,
    tmp_path: Path,
) -> Iterator[Release]:
    with chart_release(monitoring, helm_binary, core, tmp_path) as made:
        yield made


def target_of(pipeline: str) -> dict[str, Any] | None:
    for item in client.active_targets(prometheus.URL):
        labels = item["labels"]
        if labels.get("job") == "sluice-driver" and labels.get("pipeline") == pipeline:
            return item
    return None


def query(promql: str) -> list[dict[str, Any]]:
    return client.query(prometheus.URL, promql)


def test_a_driver_cannot_publish_for_another_pipeline_and_a_flood_is_cut_off(
    release: Release, custom: Any, core: Any
) -> None:
    ns = release.watched
    victim, impostor, flood = (f"{ns}/{name}" for name in ("victim", "impostor", "flood"))
    pipelines = {
        "victim": standin_spec(metrics=True),
        "impostor": standin_spec(metrics="impostor", victim=victim),
        "flood": standin_spec(metrics="many", series=FLOOD),
    }
    made = [Pipeline(custom, core, ns, name) for name in pipelines]
    for pipeline in made:
        pipeline.create(pipelines[pipeline.name])
    started = time.monotonic()
    try:
        for pipeline in made:
            pipeline.wait_phase("Running", timeout=120)
        flagged = Figure(
            "SluiceDriverDown",
            flood,
            "100,000 series over the sample limit",
            time.time(),
            for_seconds("SluiceDriverDown") + 2 * DELIVERY_SECONDS,
            "its first scrape (≤ 5 s) + for 5 min + 10 s",
        )
        up = {
            key: wait_for(
                lambda key=key: (t := target_of(key)) and t["health"] == "up" and t,  # type: ignore[misc]
                timeout=120,
                interval=1.0,
                what=f"{key}'s target up",
                ignoring=(client.ApiError,),
            )
            for key in (victim, impostor)
        }
        cut = wait_for(
            lambda: (t := target_of(flood)) and t["health"] == "down" and t,
            timeout=120,
            interval=1.0,
            what="the flood's target down",
            ignoring=(client.ApiError,),
        )
        print(f"\nthree drivers Running -> targets settled: {time.monotonic() - started:.1f}s")
        print(f"flood: {cut['lastError']!r}")
        assert "sample limit exceeded" in cut["lastError"], cut["lastError"]
        [flood_up] = query(f'up{{job="sluice-driver", pipeline="{flood}"}}')
        assert flood_up["value"][1] == "0"

        # Several scrapes of the impostor, then only the victim's own series under its name.
        wait_for(
            lambda: (
                float(query(f'scrape_samples_scraped{{pipeline="{impostor}"}}')[0]["value"][1]) > 0
            ),
            timeout=60,
            interval=1.0,
            what="the impostor scraped",
            ignoring=(IndexError, client.ApiError),
        )
        instance = up[victim]["labels"]["instance"]
        under_victim = query(f'{{pipeline="{victim}", job="sluice-driver"}}')
        assert {s["metric"]["instance"] for s in under_victim} == {instance}
        names = {s["metric"]["__name__"] for s in under_victim}
        assert not names & {"sluice_consumer_lag", "sluice_dependency_available"}, names
        assert "sluice_operator_pipeline_phase" not in names
        [epoch] = query(f'sluice_epoch{{pipeline="{victim}"}}')
        assert epoch["value"][1] == "1"
        own = query(f'sluice_epoch{{pipeline="{impostor}"}}')
        assert [s["metric"]["instance"] for s in own] == [up[impostor]["labels"]["instance"]]
        pending = [
            a
            for a in client.get(prometheus.URL, "/api/v1/alerts")["alerts"]
            if a["labels"].get("pipeline") == victim
        ]
        assert pending == []

        # The others scrape on, each well under the limit.
        for key in (victim, impostor):
            scraped = target_of(key)
            assert scraped is not None
            assert scraped["health"] == "up", scraped
        for row in query('scrape_samples_scraped{job="sluice-driver"}'):
            print(f"samples scraped  {row['metric']['pipeline']}: {row['value'][1]}")
        for row in query('scrape_duration_seconds{job="sluice-driver"}'):
            print(f"scrape duration  {row['metric']['pipeline']}: {float(row['value'][1]):.4f}s")

        # Flagged: the alert of the cut-off driver, with its runbook's labels.
        with watching(prometheus.URL, alertmanager.URL) as watch:
            episode = watch.firing(flagged.alert, flood, after=0, timeout=600)
            flagged.seen_at = episode.firing_at
            flagged.firing_at = episode.starts_at or episode.firing_at
            assert {k: episode.labels.get(k) for k in ("namespace", "pipeline", "severity")} == {
                "namespace": ns,
                "pipeline": flood,
                "severity": "warning",
            }
            assert episode.labels["pod"].startswith("flood-driver-")
            flagged.cure, flagged.cured_at = "100 series instead", time.time()
            made[2].patch_spec({"transform": {"options": {"standin": {"series": 100}}}})
            watch.resolved(episode, timeout=300)
            flagged.gone_seen_at = episode.resolved_at
            flagged.resolved_at = episode.ends_at or episode.resolved_at
        print(table([flagged]))
        assert flagged.to_fire is not None
        assert flagged.to_fire <= flagged.promise, table([flagged])
    finally:
        for pipeline in made:
            pipeline.delete()
        for pipeline in made:
            wait_for(lambda p=pipeline: p.get() is None, timeout=60, what=f"{pipeline.name} gone")  # type: ignore[misc]
