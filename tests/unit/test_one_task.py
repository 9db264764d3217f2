"""``trigger.mode: LowLatency``: which batches run in one task, and which specs the
mode accepts (the driver's model; the CRD's rules say the same, tests/integration/
test_crd.py)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sluice_api.trigger import LOW_LATENCY_ONE_TASK_RECORDS, TriggerMode
from sluice_job.one_task import SHUFFLE, in_one_task
from tests.support.observations import spec

pytestmark = pytest.mark.unit

LIMIT = LOW_LATENCY_ONE_TASK_RECORDS


@pytest.mark.parametrize(
    ("records", "limit", "single"),
    [
        (800, LIMIT, True),
        (LIMIT, LIMIT, True),
        (LIMIT + 1, LIMIT, False),  # a backlog's batch: spread over the cores
        (800, None, False),  # the default mode
        (0, LIMIT, False),
    ],
)
def test_a_small_batch_runs_in_one_task_only_in_the_low_latency_mode(
    records: int, limit: int | None, single: bool
) -> None:
    assert in_one_task(records, limit) is single


def test_a_shuffle_is_told_from_a_broadcast_in_spark_s_plan() -> None:
    shuffle = "+- Exchange hashpartitioning(event_id#12, 200), ENSURE_REQUIREMENTS, [plan_id=40]"
    broadcast = "+- BroadcastExchange HashedRelationBroadcastMode(List(input[0, string, true]))"
    found = SHUFFLE.search(shuffle)
    assert found is not None
    assert found.group(0).startswith("Exchange hashpartitioning")
    assert SHUFFLE.search(broadcast) is None
    assert SHUFFLE.search("+- Exchange RoundRobinPartitioning(4), REPARTITION_BY_NUM") is not None


def test_the_default_mode_is_default_and_low_latency_is_chosen_by_name() -> None:
    assert spec(trigger={}).trigger.mode is TriggerMode.DEFAULT
    assert spec(trigger={"mode": "LowLatency", "intervalSeconds": 0}).trigger.low_latency


@pytest.mark.parametrize(
    ("trigger", "source", "says"),
    [
        ({"mode": "LowLatency"}, None, "trigger.mode LowLatency needs trigger.intervalSeconds: 0"),
        (
            {"mode": "LowLatency", "intervalSeconds": 0},
            {"pubsub": {"project": "my-project", "subscription": "events-sub"}},
            "trigger.mode LowLatency needs source.kafka",
        ),
        ({"mode": "Fast", "intervalSeconds": 0}, None, "trigger.mode"),
    ],
)
def test_a_low_latency_spec_the_mode_cannot_run_is_refused_naming_the_field(
    trigger: dict[str, Any], source: dict[str, Any] | None, says: str
) -> None:
    changes = {"trigger": trigger, **({"source": source} if source else {})}
    with pytest.raises(ValidationError) as raised:
        spec(**changes)
    assert says in str(raised.value).replace("\n  ", ".")
