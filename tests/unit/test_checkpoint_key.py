"""The cluster id in the checkpoint key, and the pure decisions around it: what a
driver does with a legacy row (``adoption``), which DDL a keyspace still needs
(``checkpoint_schema``), how a permission refusal reads (``cassandra_access``), and
where the operator takes the cluster id from (``clusterid``)."""

from __future__ import annotations

import uuid

import pytest
from kubernetes.client.exceptions import ApiException

from sluice_api import cluster
from sluice_api.spec import PipelineSpec
from sluice_job import cassandra_access, checkpoint_schema
from sluice_job.adoption import Legacy, Step, next_step
from sluice_operator import builders, clusterid

pytestmark = pytest.mark.unit

KEY = cluster.checkpoint_key("c1", "team-a", "orders")
ME = uuid.uuid4()


def test_the_key_names_cluster_namespace_and_pipeline_and_never_equals_a_legacy_key() -> None:
    assert KEY == "c1/team-a/orders"
    assert cluster.legacy_checkpoint_key("team-a", "orders") == "team-a/orders"
    uid = "6f1c0f3e-5b7a-4c1e-9d0a-1b2c3d4e5f60"
    assert cluster.cluster_id(uid, "x") == uid
    assert cluster.checkpoint_key(uid, "a", "b").count("/") == 2


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("", "SLUICE_CLUSTER_ID is empty"),
        ("eu/west", "SLUICE_CLUSTER_ID='eu/west' is not a cluster id"),
        ("EU", "is not a cluster id"),
        ("x" * 64, "at most 63"),
        ("-eu", "is not a cluster id"),
    ],
)
def test_a_cluster_id_that_cannot_key_a_row_is_refused_naming_its_source(
    value: str, says: str
) -> None:
    with pytest.raises(cluster.ClusterIdError, match=says):
        cluster.cluster_id(value, "SLUICE_CLUSTER_ID")


@pytest.mark.parametrize(
    ("own_row", "legacy", "step"),
    [
        (True, Legacy(1, uuid.uuid4(), None), Step.NOTHING),
        (False, None, Step.NOTHING),
        (False, Legacy(1, uuid.uuid4(), None), Step.FENCE),
        (False, Legacy(4, uuid.uuid4(), KEY), Step.FENCE),  # its adopter died before copying
        (False, Legacy(5, ME, KEY), Step.COPY),  # this driver fenced it (an earlier attempt)
        (False, Legacy(1, uuid.uuid4(), "c2/team-a/orders"), Step.ELSEWHERE),
        (False, Legacy(5, uuid.uuid4(), None), Step.FENCED),  # held by this epoch elsewhere
        (False, Legacy(9, uuid.uuid4(), KEY), Step.FENCED),
    ],
)
def test_what_a_driver_does_with_a_legacy_row(
    own_row: bool, legacy: Legacy | None, step: Step
) -> None:
    assert next_step(own_row, legacy, KEY, ME, epoch=5) is step


def test_a_current_keyspace_needs_no_ddl_so_its_role_needs_no_create_or_alter() -> None:
    everything = checkpoint_schema.statements("ks")
    assert sum(s.startswith("CREATE TABLE") for s in everything) == 6  # 2 for Pub/Sub
    created = {
        "schema_version": {"component", "version"},
        "checkpoints": {"pipeline", "write_version", "applied_resets", "last_reset"},
        "batches": {"pipeline", "lost", "reset"},
        "claims": {"pipeline"},
    }
    # A keyspace made before cluster ids: only the columns added since are added.
    assert checkpoint_schema.missing("ks", created) == [
        "ALTER TABLE ks.checkpoints ADD IF NOT EXISTS adopted_by text",
        "ALTER TABLE ks.checkpoints ADD IF NOT EXISTS adopted_from text",
        "ALTER TABLE ks.checkpoints ADD IF NOT EXISTS letters_durable bigint",
        "ALTER TABLE ks.checkpoints ADD IF NOT EXISTS event_watermark bigint",
    ]
    created["checkpoints"] |= {"adopted_by", "adopted_from", "letters_durable", "event_watermark"}
    assert checkpoint_schema.missing("ks", created) == []
    # A Kafka pipeline never asks for the Pub/Sub source's tables; a Pub/Sub one does.
    pubsub = checkpoint_schema.missing("ks", created, pubsub=True)
    assert [s.split("(")[0].split(".")[-1].strip() for s in pubsub] == [
        "pubsub_spool",
        "pubsub_committed",
    ]


def test_a_permission_refusal_names_field_keyspace_role_and_permission() -> None:
    server = (
        'Error from server: code=2100 [Unauthorized] message="User team_a has no MODIFY '
        'permission on <table team_b.schema_version> or any of its parents"'
    )
    fields = {"team_b": "checkpoint.cassandra.keyspace", "events": "sink.cassandra.keyspace"}
    said = cassandra_access.describe(server, fields)
    assert said.startswith("checkpoint.cassandra.keyspace: Cassandra role 'team_a' has no MODIFY")
    assert "keyspace 'team_b'" in said
    assert "GRANT MODIFY ON TABLE team_b.schema_version TO team_a" in said
    keyspace_level = "User t has no CREATE permission on <keyspace ks> or any of its parents"
    assert "GRANT CREATE ON KEYSPACE ks TO t" in cassandra_access.describe(keyspace_level, {})
    assert cassandra_access.describe("something else", {}).endswith("something else")


def test_the_operator_names_its_cluster_by_kube_system_unless_told() -> None:
    seen: list[str] = []

    def uid(name: str) -> str:
        seen.append(name)
        return "6f1c0f3e-5b7a-4c1e-9d0a-1b2c3d4e5f60"

    assert clusterid.resolve("", uid) == "6f1c0f3e-5b7a-4c1e-9d0a-1b2c3d4e5f60"
    assert seen == ["kube-system"]
    assert clusterid.resolve("eu-west-1.prod", uid) == "eu-west-1.prod"
    assert seen == ["kube-system"], "a named cluster reads nothing"
    with pytest.raises(cluster.ClusterIdError, match="--cluster-name"):
        clusterid.resolve("EU/west", uid)


def test_an_unreadable_kube_system_stops_the_operator_naming_the_grant() -> None:
    def forbidden(_name: str) -> str:
        raise ApiException(status=403, reason="Forbidden")

    with pytest.raises(clusterid.ClusterIdUnknownError, match="namespaces/kube-system"):
        clusterid.resolve("", forbidden)


def test_the_driver_gets_the_cluster_id_beside_its_pipeline_identity() -> None:
    spec = PipelineSpec.model_validate(
        {
            "image": "img:1",
            "source": {"kafka": {"bootstrapServers": "k:9092", "topics": ["t"]}},
            "transform": {"entrypoint": "m:f"},
            "sink": {"cassandra": {"contactPoints": ["c:9042"], "keyspace": "k", "table": "t"}},
            "checkpoint": {"cassandra": {"contactPoints": ["c:9042"]}},
        }
    )
    owner = builders.Owner("orders", "team-a", "u1", "c1")
    env = {e["name"]: e.get("value") for e in builders.driver_env(owner, spec, 3)}
    assert (env["SLUICE_CLUSTER_ID"], env["SLUICE_NAMESPACE"], env["SLUICE_PIPELINE"]) == (
        "c1",
        "team-a",
        "orders",
    )


def test_the_checkpoint_schema_is_printed_for_an_administrator(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from sluice_job import cli

    assert cli.main(["--checkpoint-schema", "team_a_sluice"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("CREATE TABLE IF NOT EXISTS team_a_sluice.") == 6
    assert "ADD IF NOT EXISTS adopted_by text;" in printed
    assert cli.main(["--checkpoint-schema", "team-a; DROP KEYSPACE x"]) == 2
    assert "is not a Cassandra keyspace name" in capsys.readouterr().err
