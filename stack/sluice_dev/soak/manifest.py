"""The soak's StreamingPipeline, built from the contract's own spec model (so it is
validated here exactly as the driver will parse it). A pure function."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from sluice_api import cluster, names
from sluice_api.spec import PipelineSpec

ENTRYPOINT: Final = "sluice_job.examples.events:transform"
"""One row per valid event, keyed by event id; malformed ones rejected with a reason."""


@dataclass(frozen=True)
class Target:
    """Where the soak's pipeline lives and what it reads and writes."""

    namespace: str
    name: str
    bootstrap: str
    topic: str
    dead_letter_topic: str
    contact: str
    keyspace: str

    def checkpoint_key(self, cluster_id: str) -> str:
        """The key the driver keeps its checkpoint under, in cluster ``cluster_id``."""
        return cluster.checkpoint_key(cluster_id, self.namespace, self.name)


def manifest(
    target: Target, image: str, standby: int = 0, *, low_latency: bool = False
) -> dict[str, Any]:
    """The pipeline on ``image``; with ``standby`` 1, a hot standby kept beside the
    driver and spec changes made by warm handover (the mode a user picks for fast
    recovery), else none and clean-stop upgrades (the defaults). ``low_latency``:
    ``trigger.mode: LowLatency`` instead of a 1 s trigger."""
    upgrade = "WarmHandover" if standby else "CleanStop"
    trigger = (
        {"mode": "LowLatency", "intervalSeconds": 0} if low_latency else {"intervalSeconds": 1}
    )
    spec = PipelineSpec.model_validate(
        {
            "image": image,
            "source": {
                "kafka": {
                    "bootstrapServers": target.bootstrap,
                    "topics": [target.topic],
                    "maxRecordsPerPartition": 2_000,
                    "startingOffsets": "earliest",
                }
            },
            "transform": {"entrypoint": ENTRYPOINT},
            "sink": {
                "cassandra": {
                    "contactPoints": [target.contact],
                    "keyspace": target.keyspace,
                    "table": "events",
                }
            },
            "deadLetter": {"kafka": {"topic": target.dead_letter_topic}},
            "checkpoint": {
                "cassandra": {"contactPoints": [target.contact], "keyspace": target.keyspace}
            },
            "trigger": trigger,
            "spark": {"driver": {"cores": 1, "memory": "768m"}, "executors": {"instances": 0}},
            "upgrade": {"mode": upgrade, "stopTimeoutSeconds": 60},
            "standby": standby,
            "failover": {"nodeLostSeconds": 5},
            "restart": {"backoffSeconds": 1, "maxBackoffSeconds": 8, "maxFailures": 10},
        }
    )
    return {
        "apiVersion": f"{names.GROUP}/{names.VERSION}",
        "kind": names.KIND,
        "metadata": {"name": target.name, "namespace": target.namespace},
        "spec": spec.model_dump(by_alias=True, exclude_none=True, mode="json"),
    }
