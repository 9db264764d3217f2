"""``sluice-dev pipeline apply FILE [--cql FILE]``: a pipeline manifest written for a
cluster, run on the local stack, the last step of running one's own transform locally
(``examples/custom-transform/README.md``: build the image, apply, produce).

It starts what is not running (the servers, the CRD, the operator of the demo, which
watches namespace ``sluice-demo``), creates what the driver needs and does not create
itself (the source and dead-letter topics, the sink's tables from a CQL file), and
applies the manifest pointed at the stack: :func:`localized`, a pure function, puts it
in ``sluice-demo`` with the stack's Kafka and Cassandra addresses and a driver sized
for this machine. The image and the transform stay as written: the image must be one
the node agent knows (``sluice-dev image build``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from sluice_dev import demo, localcluster, stack
from sluice_dev.kubectl import Kubectl
from sluice_dev.paths import Layout
from sluice_dev.produce import ensure_topic
from sluice_dev.servers.cassandra import CONTACT
from sluice_dev.servers.kafka import BOOTSTRAP

SOURCE_PARTITIONS: Final = 4


def localized(
    manifest: Mapping[str, Any], *, namespace: str, bootstrap: str, contact: str
) -> dict[str, Any]:
    """The manifest in ``namespace`` with the stack's addresses, a 1 s trigger and a
    driver of one core and 768 MiB without executor pods (a purely computational
    function)."""
    body = copy.deepcopy(dict(manifest))
    body["metadata"] = {**body.get("metadata", {}), "namespace": namespace}
    spec = body["spec"]
    spec["source"]["kafka"]["bootstrapServers"] = bootstrap
    for store in ("sink", "checkpoint"):
        if "cassandra" in spec.get(store, {}):
            spec[store]["cassandra"]["contactPoints"] = [contact]
    if "deadLetter" in spec:
        spec["deadLetter"]["kafka"].pop("bootstrapServers", None)  # the source's Kafka
    spec["trigger"] = {"intervalSeconds": 1}
    spec["spark"] = {"driver": {"cores": 1, "memory": "768m"}, "executors": {"instances": 0}}
    return dict(body)


def topics(spec: Mapping[str, Any]) -> tuple[list[str], str | None]:
    """The source topics and the dead-letter topic (if any) of a pipeline spec."""
    dead_letter = spec.get("deadLetter", {}).get("kafka", {}).get("topic")
    return list(spec["source"]["kafka"]["topics"]), dead_letter


def cql_statements(text: str) -> list[str]:
    """The statements of a CQL file, without ``--`` comment lines."""
    lines = [line for line in text.splitlines() if not line.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def apply(layout: Layout, path: Path, cql: Path | None, say: Callable[[str], None]) -> str:
    """Run the manifest at ``path`` on the local stack; returns kubectl's answer."""
    manifest = yaml.safe_load(path.read_text())
    body = localized(manifest, namespace=demo.NAMESPACE, bootstrap=BOOTSTRAP, contact=CONTACT)
    say("starting the local stack (what is not running yet)")
    stack.up(layout, say=lambda line: say(f"    {line}"))
    kubectl = Kubectl(layout)
    localcluster.operator_for(
        layout,
        kubectl,
        namespace=demo.NAMESPACE,
        name=demo.OPERATOR,
        port=demo.OPERATOR_PORT,
        say=lambda line: say(f"    {line}"),
    )
    sources, dead_letter = topics(body["spec"])
    for topic in sources:
        ensure_topic(BOOTSTRAP, topic, SOURCE_PARTITIONS)
    if dead_letter:
        ensure_topic(BOOTSTRAP, dead_letter, 1)
    say(f"topics {', '.join([*sources, *filter(None, [dead_letter])])}")
    if cql is not None:
        _run_cql(cql_statements(cql.read_text()))
        say(f"tables of {cql}")
    return kubectl.apply(body)


def _run_cql(statements: list[str]) -> None:
    from cassandra.cluster import Cluster

    host, port = CONTACT.rsplit(":", 1)
    cluster = Cluster([host], port=int(port))
    try:
        session = cluster.connect()
        for statement in statements:
            session.execute(statement, timeout=60)
    finally:
        cluster.shutdown()
