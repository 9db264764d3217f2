"""Hand-made observations of one pipeline, for the operator's pure logic (its
lifecycle rules and the metrics recorded from them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sluice_api.spec import PipelineSpec
from sluice_operator import naming
from sluice_operator.model import NodeView, Observed, PodPhase, PodView, Status

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
SPEC: dict[str, Any] = {
    "image": "sluice-job:v1",
    "source": {"kafka": {"bootstrapServers": "k:9092", "topics": ["t"]}},
    "transform": {"entrypoint": "sluice_job.examples.kpi:transform"},
    "sink": {"cassandra": {"contactPoints": ["c"], "keyspace": "a", "table": "t"}},
    "checkpoint": {"cassandra": {"contactPoints": ["c"]}},
    "trigger": {"intervalSeconds": 7},
    "failover": {"nodeLostSeconds": 30},
    "restart": {"backoffSeconds": 10, "maxBackoffSeconds": 60, "maxFailures": 3},
}


def spec(**changes_: Any) -> PipelineSpec:
    return PipelineSpec.model_validate({**SPEC, **changes_})


def observed(status: Status, pods: tuple[PodView, ...] = (), **kw: Any) -> Observed:
    """Pipeline ``ns/kpis`` with ``SPEC`` at ``NOW`` on two Ready nodes; ``kw`` overrides."""
    values: dict[str, Any] = {
        "name": "kpis",
        "namespace": "ns",
        "uid": "u1",
        "generation": 1,
        "spec": spec(),
        "spec_error": None,
        "status": status,
        "pods": pods,
        "nodes": {"n1": NodeView("n1", True), "n2": NodeView("n2", True)},
        "deleting": False,
        "now": NOW,
    }
    values.update(kw)
    return Observed(**values)


def standby_pod(epoch: int = 5, age: float = 10, **fields: Any) -> PodView:
    """The pod of pipeline ``kpis``'s standby of ``epoch``, created ``age`` seconds
    before ``NOW`` on node ``n2``, running; ``fields`` override."""
    values: dict[str, Any] = {
        "phase": PodPhase.RUNNING,
        "node": "n2",
        "created_at": NOW - timedelta(seconds=age),
        "running_since": NOW - timedelta(seconds=age - 1),
        "ip": "10.0.0.5",
        **fields,
    }
    return PodView(naming.driver_pod("kpis", epoch), epoch, **values)
