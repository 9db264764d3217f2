"""A default driver's Spark (local mode) listens on loopback only (issue 38, finding
7). Its RPC endpoint and block manager take Java-serialized messages; on the old code
they listened on the host's address (on this machine 192.0.2.2, where every pod of a
cluster could reach them) without authentication, and a UI turned on listened on every
address (``*:4040``) with its kill links. The session is built from the
driver's own configuration (``spark_conf``) in a process of its own, which reports
the addresses its JVM listens on from ``/proc/net/tcp``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from sluice_dev.paths import REPO_ROOT

pytestmark = pytest.mark.integration

PROBE = textwrap.dedent(
    """
    import json, sys
    from sluice_api.spec import PipelineSpec
    from sluice_job.spark import session, spark_conf

    spec = PipelineSpec.model_validate({
        "image": "i",
        "source": {"kafka": {"bootstrapServers": "k:1", "topics": ["t"]}},
        "transform": {"entrypoint": "m:f"},
        "sink": {"cassandra": {"contactPoints": ["c"], "keyspace": "k", "table": "t"}},
        "checkpoint": {"cassandra": {"contactPoints": ["c"]}},
        "spark": {"driver": {"cores": 1}, "ui": {"enabled": True}},
    })
    spark = session(spark_conf(spec, {}, "rpc-probe", sys.executable))
    assert spark.range(1000).selectExpr("sum(id)").first()[0] == 499500
    conf = spark.sparkContext.getConf()
    manager = spark.sparkContext._jsc.sc().env().blockManager().blockManagerId()
    ports = {
        "rpc": int(conf.get("spark.driver.port")),
        "blockmanager": manager.port(),
        "ui": int(spark.sparkContext.uiWebUrl.rsplit(":", 1)[1]),
    }
    listening = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port = local.rsplit(":", 1)
            if state == "0A":  # LISTEN
                listening.setdefault(int(port, 16), []).append(address)
    print(json.dumps({
        "ports": ports,
        "listening": {name: listening.get(port, []) for name, port in ports.items()},
        "authenticate": conf.get("spark.authenticate"),
    }))
    spark.stop()
    """
)

LOOPBACK_HEX = {"0100007F", "0000000000000000FFFF00000100007F"}
"""127.0.0.1 as /proc/net/tcp and tcp6 write it (the JVM's sockets are IPv6,
IPv4-mapped)."""


def test_a_local_mode_driver_and_its_ui_listen_on_loopback_only() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["authenticate"] == "true"
    for name, addresses in report["listening"].items():
        assert addresses, f"nothing listens on the {name} port {report['ports'][name]}"
        assert set(addresses) <= LOOPBACK_HEX, (
            f"the driver's {name} port {report['ports'][name]} listens on {addresses}"
        )
