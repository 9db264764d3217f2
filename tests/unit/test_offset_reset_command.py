"""``sluice offsets``: the request it writes, the report it prints, and the operator
recording a reset once the driver of the spec asking for it commits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sluice_operator import changes, naming
from sluice_operator.actions import Decision, Emit, WriteStatus
from sluice_operator.command import gave_up, in_effect, parser, report, reset_request
from sluice_operator.decide import decide
from sluice_operator.model import AppliedReset, Phase, PodPhase, PodView, Status
from sluice_operator.progress import DriverProgress
from tests.support.observations import NOW, observed, spec

pytestmark = pytest.mark.unit
WHEN = datetime(2026, 11, 24, 18, 30, 5, tzinfo=UTC)


def request(*argv: str) -> dict[str, Any]:
    args = parser().parse_args(["offsets", "reset", "kpis", "--reason", "bad deploy", *argv])
    made = reset_request(args, "alice", WHEN)
    return made.model_dump(mode="json", by_alias=True, exclude_none=True)


def test_a_replay_from_a_time_names_who_why_and_a_fresh_id() -> None:
    assert request("--to-datetime", "2026-11-24T10:00:00Z") == {
        "id": "reset-20261124t183005z",
        "to": "Timestamp",
        "timestamp": "2026-11-24T10:00:00Z",
        "reason": "bad deploy",
        "requestedBy": "alice",
    }


def test_earliest_latest_and_explicit_offsets() -> None:
    assert request("--to-earliest", "--id", "again")["to"] == "Earliest"
    assert request("--to-earliest", "--id", "again")["id"] == "again"
    assert request("--to-latest")["to"] == "Latest"
    explicit = request("--to-offset", "events:0=42", "--to-offset", "my.topic:3=7")
    assert explicit["offsets"] == [
        {"topic": "events", "partition": 0, "offset": 42},
        {"topic": "my.topic", "partition": 3, "offset": 7},
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--to-offset", "events=42"), "expected TOPIC:PARTITION=OFFSET"),
        (("--to-offset", "events:0=-1"), "expected TOPIC:PARTITION=OFFSET"),
        (("--to-datetime", "last tuesday"), "not an RFC 3339 time"),
        (("--to-earliest", "--id", "no spaces"), "String should match pattern"),
    ],
)
def test_a_wrong_option_is_named(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        request(*argv)


def pipeline(status: dict[str, Any]) -> dict[str, Any]:
    reset = {"id": "r1", "to": "Timestamp", "timestamp": "2026-11-24T10:00:00Z"}
    reset |= {"reason": "bad deploy", "requestedBy": "alice"}
    return {
        "metadata": {"namespace": "ns", "name": "kpis"},
        "spec": {"source": {"kafka": {"topics": ["events"]}}, "offsetReset": reset},
        "status": status,
    }


def test_show_says_whether_the_reset_asked_for_is_in_effect() -> None:
    pending = pipeline({"phase": "Upgrading", "epoch": 4})
    assert "reset:       r1 to Timestamp 2026-11-24T10:00:00Z: pending" in report(pending)
    assert "by alice: bad deploy" in report(pending)
    assert not in_effect(pending, "r1")
    done = pipeline(
        {
            "phase": "Running",
            "epoch": 5,
            "lastCommit": {"batchId": 12, "time": "2026-11-24T18:31:00+00:00"},
            "lag": {"records": 0, "time": "2026-11-24T18:31:00+00:00"},
            "offsetReset": {"id": "r1", "to": "Timestamp", "epoch": 5, "time": "t"},
        }
    )
    shown = report(done)
    assert "in effect since epoch 5 (t)" in shown
    assert "last commit: batch 12" in shown
    assert "lag:         0 records" in shown
    assert in_effect(done, "r1")


def test_wait_gives_up_on_a_rollback_or_failure_seen_after_the_request() -> None:
    asked = WHEN
    later = (WHEN + timedelta(seconds=30)).isoformat()
    rolled = {"time": later, "reason": "exit 2: offsetReset.offsets: offset 9 of a/0"}
    assert gave_up(pipeline({"observedGeneration": 3, "rolledBack": rolled}), 3, asked)
    assert gave_up(pipeline({"observedGeneration": 2, "phase": "Failed"}), 3, asked) is None
    assert gave_up(pipeline({"observedGeneration": 3, "phase": "Failed"}), 3, asked)
    old = {"time": (WHEN - timedelta(days=1)).isoformat(), "reason": "older"}
    assert gave_up(pipeline({"observedGeneration": 3, "rolledBack": old}), 3, asked) is None


def written(decision: Decision) -> Status:
    return [a.status for a in decision.actions if isinstance(a, WriteStatus)][-1]


def test_the_operator_records_a_reset_once_its_driver_commits_with_an_event() -> None:
    asked = spec(offsetReset={"id": "r1", "to": "Latest", "requestedBy": "bob", "reason": "skip"})
    pod = PodView(naming.driver_pod("kpis", 5), 5, PodPhase.RUNNING, "n1", ip="10.0.0.1")
    status = Status(Phase.RUNNING, 5, pod.name, asked.image, changes.spec_hash(asked))
    before = DriverProgress(epoch=5, batch_id=None, committed_at=None, lag=None)
    assert (
        written(decide(observed(status, (pod,), spec=asked, progress=before))).offset_reset is None
    )
    after = DriverProgress(epoch=5, batch_id=8, committed_at=NOW, lag=0)
    decision = decide(observed(status, (pod,), spec=asked, progress=after))
    assert written(decision).offset_reset == AppliedReset("r1", "Latest", 5, NOW.isoformat())
    events = [a.message for a in decision.actions if isinstance(a, Emit)]
    assert "offset reset r1 to Latest in effect under epoch 5 requested by bob: skip" in events
    again = decide(observed(written(decision), (pod,), spec=asked, progress=after))
    assert not [a for a in again.actions if isinstance(a, Emit) and a.reason == "OffsetReset"]
