"""The contract package between operator and driver: what one side writes, the other
reads back unchanged, and the alerts name only series the contract defines."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice_api import metrics, status, termination
from sluice_api.exitcodes import ExitCode
from sluice_api.status import Phase, PipelineStatus, StopReason
from sluice_api.termination import Termination
from sluice_dev.paths import REPO_ROOT
from sluice_operator.model import (
    AppliedReset,
    GoodSpec,
    Lag,
    LastCommit,
    Rollback,
    Standby,
    StandbyState,
    Status,
)

pytestmark = pytest.mark.unit

small = st.integers(min_value=0, max_value=2**40)
offsets = st.dictionaries(
    st.text(alphabet="abcdefghij-._", min_size=1, max_size=12),
    st.dictionaries(st.integers(0, 99).map(str), small, max_size=4),
    max_size=3,
)


@given(
    code=st.sampled_from(list(ExitCode)),
    reason=st.text(max_size=30),
    message=st.text(max_size=50),
    batch=st.none() | small,
    epoch=st.none() | small,
    held=st.none() | small,
    positions=offsets,
)
def test_a_termination_message_reads_back_as_written(
    code: ExitCode,
    reason: str,
    message: str,
    batch: int | None,
    epoch: int | None,
    held: int | None,
    positions: dict[str, dict[str, int]],
) -> None:
    written = Termination(code, reason, message, batch, epoch, positions, held_by_epoch=held)
    assert termination.parse(written.to_json()) == written


def test_offsets_that_do_not_fit_are_left_out_and_say_so() -> None:
    many = {"t": {str(p): 10**12 + p for p in range(400)}}
    written = Termination(ExitCode.FAILURE, "Failed", "x" * 5000, 7, 2, many)
    text = written.to_json()
    assert len(text.encode()) <= termination.LIMIT
    read = termination.parse(text)
    assert read is not None
    assert (read.offsets, read.offsets_omitted) == ({}, True)
    assert (read.last_batch_id, read.epoch, len(read.message)) == (7, 2, 1000)


@pytest.mark.parametrize(
    "text",
    ["", "Error: OOMKilled", "[1, 2]", '{"exitCode": "x", "reason": "r"}', '{"reason": "r"}'],
)
def test_what_is_not_a_drivers_message_parses_to_none(text: str) -> None:
    assert termination.parse(text) is None


def test_the_alerts_name_only_series_of_the_contract() -> None:
    rules = (REPO_ROOT / "charts" / "sluice" / "files" / "alerts.yaml").read_text()
    named = set(re.findall(r"\b(sluice_[a-z_]*[a-z])\b", rules))
    known = set(metrics.DRIVER) | set(metrics.OPERATOR)
    suffixes = ("", "_total", "_bucket", "_sum", "_count")
    unknown = {n for n in named if not any(n.removesuffix(s) in known for s in suffixes if s)}
    unknown = {n for n in unknown if n not in known}
    assert named, "the alert rules name sluice series"
    assert not unknown, f"alert rules name series outside sluice_api.metrics: {sorted(unknown)}"


def test_every_status_field_the_operator_writes_is_in_the_status_model() -> None:
    """The CRD's status schema comes from ``PipelineStatus`` and keeps nothing else: a
    field the operator wrote outside it would be pruned by the API server, and lost."""
    written = Status(
        phase=Phase.UPGRADING,
        epoch=3,
        driver_pod="p-driver-3",
        image="job:v2",
        spec_hash="abc",
        stop_reason=StopReason.UPGRADE,
        failures=1,
        next_start_at="2026-11-24T01:00:00+00:00",
        restarts=2,
        observed_generation=4,
        last_commit=LastCommit(7, "2026-11-24T01:00:00+00:00"),
        lag=Lag(120, "2026-11-24T01:00:00+00:00"),
        message="upgrading",
        conditions=({"type": "Ready", "status": "False", "reason": "Upgrading"},),
        last_good=GoodSpec("abd", "job:v1", '{"image": "job:v1"}'),
        rolled_back=Rollback("job:v0", "abc", "3 failures", "2026-11-24T01:00:00+00:00"),
        offset_reset=AppliedReset("r1", "Earliest", 3, "2026-11-24T01:00:00+00:00"),
        executor_secrets=("p-spark-auth",),
        standby=Standby("p-driver-4", 4, "abd", "job:v3", StandbyState.READY, ""),
    ).to_patch()
    assert set(written) == status.wire_fields()
    model = PipelineStatus.model_validate(written)
    assert model.model_dump(mode="json", by_alias=True, exclude_none=True) == written


def _checkpoint(**fields: object) -> dict[str, object]:
    return {"contactPoints": ["c:9042"], "keyspace": "sluice", **fields}


def test_create_keyspace_needs_a_replication_and_each_strategy_its_replicas() -> None:
    from pydantic import ValidationError

    from sluice_api.checkpoint import CassandraCheckpoint

    with pytest.raises(ValidationError, match="createKeyspace needs replication"):
        CassandraCheckpoint.model_validate(_checkpoint(createKeyspace=True))
    with pytest.raises(ValidationError, match="SimpleStrategy takes replicationFactor"):
        CassandraCheckpoint.model_validate(
            _checkpoint(createKeyspace=True, replication={"strategy": "SimpleStrategy"})
        )
    with pytest.raises(ValidationError, match="NetworkTopologyStrategy takes datacenters"):
        CassandraCheckpoint.model_validate(
            _checkpoint(createKeyspace=True, replication={"replicationFactor": 3})
        )
    with pytest.raises(ValidationError, match="datacenter name"):
        CassandraCheckpoint.model_validate(
            _checkpoint(replication={"datacenters": {"dc 1; DROP": 3}})
        )


def test_replication_as_cql() -> None:
    from sluice_api.checkpoint import KeyspaceReplication

    nts = KeyspaceReplication.model_validate({"datacenters": {"eu": 3, "us": 3}})
    assert nts.cql() == "{'class': 'NetworkTopologyStrategy', 'eu': '3', 'us': '3'}"
    simple = KeyspaceReplication.model_validate(
        {"strategy": "SimpleStrategy", "replicationFactor": 1}
    )
    assert simple.cql() == "{'class': 'SimpleStrategy', 'replication_factor': '1'}"
